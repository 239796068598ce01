import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { playbookJsonSchema } from './schema.js';
import { TOOL_KINDS } from './types.js';

const fixture = (name: string) =>
  parseYaml(readFileSync(join(import.meta.dirname, '..', 'test', 'fixtures', 'playbooks', 'valid', name), 'utf8')) as Record<string, unknown>;

describe('playbookJsonSchema', () => {
  const validate = new Ajv({ allErrors: true, strict: true, strictTypes: false, allowUnionTypes: true }).compile(playbookJsonSchema);

  it('is plain JSON, so CRD generation can embed it', () => {
    expect(JSON.parse(JSON.stringify(playbookJsonSchema))).toEqual(playbookJsonSchema);
  });

  it('accepts a realistic v2 playbook on its own', () => {
    expect(validate(fixture('http-pagination-retry.yaml')), JSON.stringify(validate.errors)).toBe(true);
  });

  it('lists exactly the tool kinds of the language', () => {
    const step = (playbookJsonSchema.properties as Record<string, { items: { properties: { tool: { properties: { kind: { enum: string[] } } } } } }>).workflow;
    expect(step.items.properties.tool.properties.kind.enum).toEqual([...TOOL_KINDS]);
  });

  it('rejects unknown step fields and unknown fields of strict tool kinds, and keeps legacy kinds open', () => {
    const doc = (step: Record<string, unknown>) => ({ apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata: { name: 'x' }, workflow: [step] });
    expect(validate(doc({ step: 'a', nxt: 'b' }))).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({ keyword: 'additionalProperties', params: { additionalProperty: 'nxt' } });
    expect(validate(doc({ step: 'a', tool: { kind: 'postgres', comand: 'x' } }))).toBe(false);
    expect(validate(doc({ step: 'a', tool: { kind: 'postgres', command: 'x', auth: { type: 'postgres', credential: 'pg' } } }))).toBe(true);
    expect(validate(doc({ step: 'a', tool: { kind: 'slack', anything: 1 } }))).toBe(true);
  });

  it('accepts the three next forms and the legacy retry objects', () => {
    const doc = (step: Record<string, unknown>) => ({ apiVersion: 'noetl.io/v2', kind: 'Playbook', metadata: { name: 'x' }, workflow: [step] });
    for (const next of ['b', ['b', 'c'], [{ step: 'b', args: { n: 1 } }]]) expect(validate(doc({ step: 'a', next }))).toBe(true);
    expect(validate(doc({ step: 'a', retry: { when: 'x', max_attempts: 2 } }))).toBe(true);
    expect(validate(doc({ step: 'a', retry: { on_error: { max_attempts: 2 }, on_success: { while: 'y', next_call: {} } } }))).toBe(true);
    expect(validate(doc({ step: 'a', next: { args: {} } }))).toBe(false);
  });
});

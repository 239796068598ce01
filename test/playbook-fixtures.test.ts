/**
 * Every playbook under test/fixtures/playbooks is parsed by the real parser:
 *  - valid/*: no errors, no warnings; together they use every step field, tool kind, action and
 *    next form, so a regression in any of them shows up here;
 *  - legacy/<name>.yaml: normalises to legacy/<name>.expected.json with the listed warnings;
 *  - invalid/<name>.yaml: fails with exactly the error paths of invalid/<name>.expected.json,
 *    each message containing the expected fragment.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { LEGACY_OPERATIONS, TOOL_KINDS, parsePlaybook, type Playbook, type Tool } from '../playbook/index.js';

const root = join(import.meta.dirname, 'fixtures', 'playbooks');
const list = (dir: string) => readdirSync(join(root, dir)).filter((f) => /\.(ya?ml|json)$/.test(f) && !f.endsWith('.expected.json')).sort();
const read = (dir: string, file: string) => readFileSync(join(root, dir, file), 'utf8');
const expected = (dir: string, file: string) => JSON.parse(read(dir, file.replace(/\.ya?ml$/, '.expected.json')));

interface Expected {
  path: string;
  message: string;
}

function toolsOf(pb: Playbook): Tool[] {
  const tools: Tool[] = pb.workbook.map((t) => t.tool);
  for (const s of pb.workflow) {
    if (s.tool) tools.push(s.tool);
    for (const c of s.case ?? []) for (const a of c.then) if (a.action === 'sink') tools.push(a.tool);
    for (const r of s.retry ?? []) if (r.then.sink) tools.push(r.then.sink);
  }
  return tools;
}

describe('fixture playbooks', () => {
  const valid = list('valid');
  const legacy = list('legacy');
  const invalid = list('invalid');

  it('has at least 30 fixtures', () => {
    expect(valid.length + legacy.length + invalid.length).toBeGreaterThanOrEqual(30);
  });

  describe('valid', () => {
    for (const file of valid) {
      it(`${file} parses without errors or warnings`, () => {
        const r = parsePlaybook(read('valid', file));
        expect(r.errors).toEqual([]);
        expect(r.warnings).toEqual([]);
        expect(r.playbook?.workflow.length).toBeGreaterThan(0);
      });
    }

    it('together use every step field, tool kind, case action and next form', () => {
      const fields = new Set<string>();
      const nextForms = new Set<string>();
      const kinds = new Set<string>();
      const actions = new Set<string>();
      for (const file of valid) {
        const raw = parseYaml(read('valid', file)) as { workflow: Array<Record<string, unknown>> };
        for (const step of raw.workflow) {
          Object.keys(step).forEach((k) => fields.add(k));
          const n = step.next;
          if (typeof n === 'string') nextForms.add('string');
          else if (Array.isArray(n)) n.forEach((t) => nextForms.add(typeof t === 'string' ? 'list of strings' : 'list of {step, args}'));
        }
        const pb = parsePlaybook(read('valid', file)).playbook as Playbook;
        toolsOf(pb).forEach((t) => kinds.add(t.kind));
        pb.workflow.forEach((s) => s.case?.forEach((c) => c.then.forEach((a) => actions.add(a.action))));
      }
      expect([...fields].sort()).toEqual(['args', 'case', 'desc', 'loop', 'next', 'retry', 'step', 'tool', 'vars']);
      expect([...kinds].sort()).toEqual([...TOOL_KINDS].sort());
      expect([...actions].sort()).toEqual(['call', 'collect', 'fail', 'next', 'result', 'retry', 'set', 'sink', 'skip']);
      expect([...nextForms].sort()).toEqual(['list of strings', 'list of {step, args}', 'string']);
    });
  });

  describe('legacy', () => {
    for (const file of legacy) {
      it(`${file} normalises to its expected v2 playbook`, () => {
        const want = expected('legacy', file) as { playbook: Playbook; warnings: Expected[] };
        const r = parsePlaybook(read('legacy', file));
        expect(r.errors).toEqual([]);
        expect(r.playbook).toEqual(want.playbook);
        expect(r.warnings.map((w) => w.path).sort()).toEqual(want.warnings.map((w) => w.path).sort());
        for (const w of want.warnings) {
          expect(r.warnings.some((got) => got.path === w.path && got.message.includes(w.message)), `${w.path}: ${w.message}`).toBe(true);
        }
      });
    }

    it('cover every legacy task operation', () => {
      const ops = new Set<string>();
      for (const file of legacy) {
        const raw = parseYaml(read('legacy', file)) as { workflow: Array<{ call?: { name?: string; type?: string } }> };
        for (const s of raw.workflow) for (const v of [s.call?.type, s.call?.name]) if (v && v in LEGACY_OPERATIONS) ops.add(v);
      }
      expect([...ops].sort()).toEqual(Object.keys(LEGACY_OPERATIONS).sort());
    });
  });

  describe('invalid', () => {
    for (const file of invalid) {
      it(`${file} fails with the expected errors`, () => {
        const want = expected('invalid', file) as { errors: Expected[] };
        const r = parsePlaybook(read('invalid', file));
        expect(r.playbook).toBeUndefined();
        expect(r.errors.map((e) => e.path).sort()).toEqual(want.errors.map((e) => e.path).sort());
        for (const e of want.errors) {
          expect(r.errors.some((got) => got.path === e.path && got.message.includes(e.message)), `${e.path}: ${e.message}`).toBe(true);
        }
      });
    }
  });
});

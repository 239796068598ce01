import { describe, expect, it } from 'vitest';
import { Ajv } from 'ajv';
import { AppError } from '../errors.js';
import { idInput } from './schemas.js';
import { mapValidationErrors, toId } from './support.js';

const ajv = new Ajv({ allErrors: true, strict: false, verbose: true });

function problems(schema: object, data: unknown) {
  const v = ajv.compile(schema);
  expect(v(data)).toBe(false);
  return mapValidationErrors(v.errors!, 'body');
}

describe('mapValidationErrors', () => {
  it('names missing fields, nested and indexed', () => {
    const schema = {
      type: 'object', required: ['a', 'list'],
      properties: { list: { type: 'array', items: { type: 'object', required: ['name'] } } },
    };
    expect(problems(schema, { list: [{ name: 'x' }, {}] })).toEqual([
      { location: 'body', field: 'a', message: 'is required' },
      { location: 'body', field: 'list[1].name', message: 'is required' },
    ]);
  });

  it('collapses an anyOf into one problem with its x-message', () => {
    const schema = { type: 'object', properties: { id: idInput } };
    expect(problems(schema, { id: 'abc' })).toEqual([
      { location: 'body', field: 'id', message: 'must be an id: a decimal string or a non-negative integer' },
    ]);
  });

  it('lists the allowed values of an enum', () => {
    const schema = { type: 'object', properties: { kind: { enum: ['server', 'worker'] } } };
    expect(problems(schema, { kind: 'x' })[0].message).toBe('must be equal to one of the allowed values: "server", "worker"');
  });
});

describe('toId', () => {
  it('accepts decimal strings and safe integers, as canonical strings', () => {
    expect(toId('42', 'id')).toBe('42');
    expect(toId('007', 'id')).toBe('7');
    expect(toId('0', 'id')).toBe('0');
    expect(toId(42, 'id')).toBe('42');
    expect(toId('9223372036854775807', 'id')).toBe('9223372036854775807');
  });

  it('refuses the rest with a 400 naming the field', () => {
    for (const bad of ['x', '-1', 1.5, -3, null, {}]) {
      const err = (() => {
        try {
          toId(bad, 'parent_execution_id');
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).statusCode).toBe(400);
      expect((err as AppError).message).toContain('parent_execution_id');
    }
    expect(() => toId(2 ** 60, 'id')).toThrow(/decimal strings/);
    expect(() => toId('9223372036854775808', 'id')).toThrow(/out of range/);
  });
});

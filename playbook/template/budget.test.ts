import { afterEach, describe, expect, it } from 'vitest';
import { ATTACKS, nested } from '../../test/fixtures/template-attacks.js';
import { evalCondition, renderString, setTemplateLimits, TemplateError } from './index.js';

const ctx = { workload: {}, deep: nested(5000), many: Array.from({ length: 20_000 }, (_, i) => ({ id: i, g: i % 7 })) };

afterEach(() => setTemplateLimits());

describe('template budgets', () => {
  for (const [name, template] of Object.entries(ATTACKS)) {
    it(`${name}: fails with a budget error`, () => {
      let err: unknown;
      try {
        renderString(template, ctx, { field: 'tool.args.x' });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(TemplateError);
      expect((err as TemplateError).kind).toBe('budget');
      expect((err as TemplateError).message).toMatch(/over budget|too large/);
      expect((err as TemplateError).message).toContain('tool.args.x');
    });
  }

  it('an over-budget condition is an error, not false', () => {
    expect(() => evalCondition('{{ [1] | slice(100000000) | length > 0 }}', ctx)).toThrow(/over budget/);
  });

  it('unique and groupby are linear and keep Python equality', () => {
    setTemplateLimits({ maxMs: 600_000 }); // semantics here, not speed (the machine may be loaded)
    expect(renderString("{{ [1, 1.0, true, 'a', 'a', [1], [1], {'k': 1}, {'k': true}, none] | unique }}", ctx)).toEqual([1, 'a', [1], { k: 1 }, null]);
    expect(renderString('{{ many | unique(attribute="g") | length }}', ctx)).toBe(7);
    expect(renderString('{{ range(100000) | list | unique | length }}', ctx)).toBe(100_000);
    const groups = renderString("{{ many | groupby('g') }}", ctx) as Array<{ grouper: number; list: unknown[] }>;
    expect(groups.map((g) => [g.grouper, g.list.length])).toEqual([0, 1, 2, 3, 4, 5, 6].map((g) => [g, g < 20_000 % 7 ? 2858 : 2857]));
  });

  it('limits are configurable; ordinary templates stay well inside the defaults', () => {
    expect(renderString("{{ 'x' * 20 }}-", ctx)).toBe(`${'x'.repeat(20)}-`);
    setTemplateLimits({ maxOutput: 10 });
    expect(() => renderString("{{ 'x' * 20 }}-", ctx)).toThrow(/output/);
    setTemplateLimits({ maxString: 100 });
    expect(() => renderString("{{ 'x' * 200 }}", ctx)).toThrow(/too large|over budget/);
    setTemplateLimits({ maxDepth: 3 });
    expect(() => renderString('{{ [[[[1]]]] | tojson }}', ctx)).toThrow(/deeper than 3/);
    setTemplateLimits({ maxItems: 5 });
    expect(() => renderString('{{ [1, 2, 3, 4, 5, 6] | list }}', ctx)).toThrow(/items/);
    setTemplateLimits();
    expect(renderString('{{ many | selectattr("g", "equalto", 0) | map(attribute="id") | list | length }}', ctx)).toBe(2858);
    expect(() => setTemplateLimits({ maxSteps: -1 })).toThrow(/maxSteps/);
  });
});

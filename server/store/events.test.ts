import { describe, expect, it } from 'vitest';
import { placed } from './events.js';

describe('placed (a value stored beside a payload put back in it)', () => {
  it('puts the value at its path, keeping what the payload has around it', () => {
    const payload = { on: 'call.done', effects: { done: { item: 3 }, vars: { a: 1 } } };
    expect(placed(payload, ['effects', 'done', 'result'], { rows: [1, 2] })).toEqual({ on: 'call.done', effects: { done: { item: 3, result: { rows: [1, 2] } }, vars: { a: 1 } } });
    expect(placed({}, ['response'], 'text')).toEqual({ response: 'text' });
    // a path whose objects the payload lost is made again
    expect(placed({}, ['effects', 'done', 'result'], 1)).toEqual({ effects: { done: { result: 1 } } });
  });

  it('a step named __proto__ is an own key, never the prototype', () => {
    const state = JSON.parse('{"steps": {"__proto__": {"status": "completed"}}}');
    placed(state, ['steps', '__proto__', 'result'], { big: true });
    expect(Object.getPrototypeOf(state.steps)).toBe(Object.prototype);
    expect(Object.hasOwn(state.steps, '__proto__')).toBe(true);
    expect(JSON.parse(JSON.stringify(state))).toEqual(JSON.parse('{"steps": {"__proto__": {"status": "completed", "result": {"big": true}}}}'));
    const fresh = placed({}, ['__proto__', 'result'], 1);
    expect(Object.getPrototypeOf(fresh)).toBe(Object.prototype);
    expect(JSON.stringify(fresh)).toBe('{"__proto__":{"result":1}}');
  });
});

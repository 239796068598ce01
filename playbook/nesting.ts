/**
 * Nesting depth of YAML text and of decoded values, measured without recursion. The `yaml`
 * parser recurses per level: around 800 levels it overflows the stack, and a second deep
 * document after such an overflow has crashed the whole process inside V8's regexp compiler
 * (seen on Node 20). A 2 MiB document can nest far deeper than that, so depth is checked first.
 */
import { CST, Lexer } from 'yaml';

/** Deepest nesting accepted; real playbooks stay well under 30. */
export const MAX_NESTING = 100;

export interface DepthReport {
  depth: number;
  /** 1-based line where `depth` was first exceeded (or reached), for the message. */
  line: number;
}

/**
 * Upper bound of the nesting of a YAML text: block indentation levels, compact `- -` items and
 * flow brackets, from the lexer's tokens (scalar contents are skipped, so brackets inside
 * strings or block scalars do not count). Stops early once `limit` is exceeded.
 */
export function yamlDepth(text: string, limit = MAX_NESTING): DepthReport {
  const stack: number[] = [];
  let flow = 0;
  let max = 0;
  let maxLine = 1;
  let line = 1;
  let atLineStart = true;
  let indent = 0;
  let lineItems = 0;
  let skipNext = false;
  const content = () => {
    if (atLineStart && flow === 0) {
      while (stack.length && stack[stack.length - 1] >= indent) stack.pop();
      stack.push(indent);
    }
    atLineStart = false;
    const depth = stack.length + lineItems + flow;
    if (depth > max) {
      max = depth;
      maxLine = line;
    }
  };
  for (const tok of new Lexer().lex(text)) {
    if (skipNext) {
      skipNext = false;
      for (let i = tok.indexOf('\n'); i !== -1; i = tok.indexOf('\n', i + 1)) line++;
      continue;
    }
    if (tok === CST.SCALAR) {
      skipNext = true;
      content();
    } else {
      switch (CST.tokenType(tok)) {
        case 'newline':
          line++;
          atLineStart = true;
          indent = 0;
          lineItems = 0;
          break;
        case 'space':
          if (atLineStart) indent = tok.length;
          break;
        case 'comment':
          break;
        case 'seq-item-ind':
        case 'explicit-key-ind':
          content();
          lineItems++;
          break;
        case 'flow-seq-start':
        case 'flow-map-start':
          content();
          flow++;
          content();
          break;
        case 'flow-seq-end':
        case 'flow-map-end':
          flow = Math.max(0, flow - 1);
          break;
        default:
          content();
      }
    }
    if (max > limit) break;
  }
  return { depth: max, line: maxLine };
}

/** Nesting depth of a decoded value (objects and arrays), iteratively; stops past `limit`. */
export function valueDepth(value: unknown, limit = MAX_NESTING): number {
  let max = 0;
  const todo: Array<[unknown, number]> = [[value, 0]];
  while (todo.length) {
    const [v, d] = todo.pop() as [unknown, number];
    if (v === null || typeof v !== 'object') continue;
    if (d + 1 > max) max = d + 1;
    if (max > limit) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') todo.push([child, d + 1]);
  }
  return max;
}

/**
 * The patch formats of the API server: RFC 7386 merge patch, RFC 6902 JSON patch, server-side
 * apply (applied as a merge) and strategic merge — which the real server accepts only for
 * built-in kinds (custom resources get 415).
 */
import { parse as parseYaml } from 'yaml';
import { HttpError, UNSUPPORTED_PATCH_MESSAGE } from './errors.js';
import type { Obj, ResourceDef } from './resources.js';

const clone = <T>(v: T): T => structuredClone(v);
const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: any, patch: any): any {
  if (!isObject(patch)) return clone(patch);
  const out: Obj = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** Merge keys of the built-in list fields kubectl's strategic patches touch (patchMergeKey). */
const MERGE_KEYS = ['name', 'containerPort', 'mountPath', 'devicePath', 'type', 'ip'];

function mergeKeyOf(items: unknown[]): string | undefined {
  if (!items.length || !items.every(isObject)) return undefined;
  return MERGE_KEYS.find((k) => items.every((i) => (i as Obj)[k] !== undefined || (i as Obj).$patch === 'delete'));
}

/**
 * Strategic merge patch for built-in kinds: a merge patch whose lists of objects merge by their
 * merge key (containers by name, ports by containerPort…), honouring `$patch: replace|delete`.
 * Lists of scalars are replaced; `$setElementOrder`/`$retainKeys` directives are ignored.
 */
export function strategicMerge(target: any, patch: any): any {
  if (Array.isArray(patch)) {
    const key = mergeKeyOf(patch);
    if (!key || !Array.isArray(target)) return clone(patch.filter((p) => !(isObject(p) && p.$patch === 'delete')));
    const out = clone(target) as Obj[];
    for (const p of patch as Obj[]) {
      const idx = out.findIndex((t) => t[key] === p[key]);
      if (p.$patch === 'delete') {
        if (idx >= 0) out.splice(idx, 1);
      } else if (idx >= 0) out[idx] = strategicMerge(out[idx], p);
      else out.push(strategicMerge(undefined, p));
    }
    return out;
  }
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _drop, ...rest } = patch;
    return clone(rest);
  }
  if (patch.$patch === 'delete') return undefined;
  const out: Obj = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue;
    if (v === null) delete out[k];
    else {
      const merged = strategicMerge(out[k], v);
      if (merged === undefined) delete out[k];
      else out[k] = merged;
    }
  }
  return out;
}

function decodePointer(ptr: string): string[] {
  if (ptr === '') return [];
  if (!ptr.startsWith('/')) throw new HttpError(422, 'Invalid', `invalid JSON pointer ${ptr}`);
  return ptr.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** RFC 6902 JSON patch. */
export function jsonPatch(doc: any, ops: any[]): any {
  if (!Array.isArray(ops)) throw new HttpError(400, 'BadRequest', 'JSON patch must be an array');
  let root = clone(doc);
  const parentOf = (parts: string[]): [any, string] => {
    let cur = root;
    for (const p of parts.slice(0, -1)) {
      cur = Array.isArray(cur) ? cur[Number(p)] : cur?.[p];
      if (cur === undefined || cur === null) throw new HttpError(422, 'Invalid', `path not found: /${parts.join('/')}`);
    }
    return [cur, parts[parts.length - 1]!];
  };
  const read = (parts: string[]): any => {
    let cur = root;
    for (const p of parts) {
      if (cur === undefined || cur === null) return undefined;
      cur = Array.isArray(cur) ? cur[Number(p)] : cur[p];
    }
    return cur;
  };
  const add = (parts: string[], value: any): void => {
    if (parts.length === 0) { root = value; return; }
    const [parent, last] = parentOf(parts);
    if (Array.isArray(parent)) {
      const idx = last === '-' ? parent.length : Number(last);
      if (!(idx >= 0 && idx <= parent.length)) throw new HttpError(422, 'Invalid', `index out of range: ${last}`);
      parent.splice(idx, 0, value);
    } else parent[last] = value;
  };
  const remove = (parts: string[]): any => {
    const [parent, last] = parentOf(parts);
    if (Array.isArray(parent)) {
      const idx = Number(last);
      if (!(idx >= 0 && idx < parent.length)) throw new HttpError(422, 'Invalid', `index out of range: ${last}`);
      return parent.splice(idx, 1)[0];
    }
    if (!(last in parent)) throw new HttpError(422, 'Invalid', `path not found: /${parts.join('/')}`);
    const v = parent[last];
    delete parent[last];
    return v;
  };
  for (const op of ops) {
    const parts = decodePointer(String(op.path));
    switch (op.op) {
      case 'add': add(parts, clone(op.value)); break;
      case 'remove': remove(parts); break;
      case 'replace': remove(parts); add(parts, clone(op.value)); break;
      case 'move': { const v = remove(decodePointer(op.from)); add(parts, v); break; }
      case 'copy': add(parts, clone(read(decodePointer(op.from)))); break;
      case 'test':
        if (JSON.stringify(read(parts)) !== JSON.stringify(op.value)) {
          throw new HttpError(422, 'Invalid', `test operation failed at ${op.path}`);
        }
        break;
      default: throw new HttpError(400, 'BadRequest', `unknown JSON patch op ${String(op.op)}`);
    }
  }
  return root;
}

export function parseBody(body: Buffer, contentType: string | undefined): Obj {
  const text = body.toString('utf8');
  const ct = (contentType ?? 'application/json').split(';')[0]!.trim();
  try {
    const v = ct.includes('yaml') ? parseYaml(text) : JSON.parse(text);
    if (v === null || typeof v !== 'object') throw new Error('body is not an object');
    return v as Obj;
  } catch (err) {
    throw new HttpError(400, 'BadRequest', `cannot decode body: ${(err as Error).message}`);
  }
}

export const mediaType = (contentType: string | undefined): string => (contentType ?? '').split(';')[0]!.trim();

/** Checks the patch type is one `def` accepts (415 otherwise), before anything else happens. */
export function checkPatchType(def: ResourceDef, contentType: string | undefined): void {
  const ct = mediaType(contentType);
  const ok = ct === 'application/json-patch+json' || ct === 'application/merge-patch+json' || ct === 'application/apply-patch+yaml'
    || (ct === 'application/strategic-merge-patch+json' && !def.custom);
  if (!ok) throw new HttpError(415, 'UnsupportedMediaType', UNSUPPORTED_PATCH_MESSAGE);
}

export function applyPatch(def: ResourceDef, existing: Obj, body: Buffer, contentType: string | undefined): Obj {
  checkPatchType(def, contentType);
  switch (mediaType(contentType)) {
    case 'application/json-patch+json': {
      let ops: any[];
      try {
        ops = JSON.parse(body.toString('utf8')) as any[];
      } catch (err) {
        throw new HttpError(400, 'BadRequest', `cannot decode body: ${(err as Error).message}`);
      }
      return jsonPatch(existing, ops);
    }
    case 'application/strategic-merge-patch+json':
      return strategicMerge(existing, parseBody(body, 'application/json'));
    case 'application/apply-patch+yaml':
      return mergePatch(existing, parseBody(body, 'application/yaml'));
    default:
      return mergePatch(existing, parseBody(body, 'application/json'));
  }
}

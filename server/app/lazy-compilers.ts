/**
 * Route schemas compiled at their first use, not when the app is built.
 *
 * fastify compiles a validator for each request part and a serializer for each response status of
 * every route as the app is built. Ours refer to the shared schemas, and fast-json-stringify checks
 * every shared schema again for each response it compiles. In a CPU profile of `server start`
 * that was 0.6 s of fast-json-stringify and 0.4 s of ajv, about half of the start, and every
 * `buildApp` of the tests paid it too. A process uses few of those compilations (error statuses,
 * admin routes and most parts are never sent or received by it), so each one now runs when a
 * request first needs it, and only once. The compilers themselves are unchanged: fastify's own serializer factory,
 * with the same shared schemas and options, and the app's ajv validator compiler.
 *
 * The price is that a broken schema fails its first request instead of the start: `compileAll`
 * compiles whatever is still pending, and a test runs it on the whole app.
 */
import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import type { ValidateFunction } from 'ajv';

type Compile<T> = () => T;

export class LazyCompilers {
  private readonly pending = new Set<Compile<unknown>>();
  private done = 0;

  /** Compilations made so far, and those still waiting for a first use. */
  counts(): { compiled: number; pending: number } {
    return { compiled: this.done, pending: this.pending.size };
  }

  /** Compiles every schema no request has needed yet; returns how many it compiled. */
  compileAll(): number {
    const all = [...this.pending];
    for (const compile of all) compile();
    return all.length;
  }

  /** `compile`, run once, at the first call of the returned thunk or at compileAll. */
  private once<T>(compile: Compile<T>): Compile<T> {
    let value: T | undefined;
    const get = (): T => {
      if (value === undefined) {
        value = compile();
        this.pending.delete(get);
        this.done++;
      }
      return value;
    };
    this.pending.add(get);
    return get;
  }

  /**
   * A validator compiler (`app.setValidatorCompiler`) whose validators compile on first use.
   * fastify reads `errors` after a failed validation and passes ajv's parent data when the
   * validator has a `schemaEnv` (so coercion can replace a root value): both are the compiled
   * validator's, read through.
   */
  validator<S>(compile: (route: S) => ValidateFunction): (route: S) => ValidateFunction {
    return (route) => {
      const get = this.once(() => compile(route));
      const validate = ((data: unknown, ctx?: unknown) => (get() as (d: unknown, c?: unknown) => boolean | Promise<unknown>)(data, ctx)) as ValidateFunction;
      Object.defineProperty(validate, 'errors', { get: () => get().errors, set: (v) => { get().errors = v; } });
      Object.defineProperty(validate, 'schemaEnv', { get: () => get().schemaEnv });
      return validate;
    };
  }

  /** fastify's serializer factory (`schemaController.compilersFactory.buildSerializer`), compiling on first use. */
  serializerFactory(): SerializerFactory {
    const eager = SerializerSelector();
    return (externalSchemas, options) => {
      const compile = eager(externalSchemas, options);
      return (route) => {
        const get = this.once(() => compile(route));
        return (doc) => get()(doc);
      };
    };
  }
}

import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifySchemaCompiler, FastifySerializerCompiler } from 'fastify';

/**
 * Compiled validators and response serializers, kept for the life of the process and shared by
 * every app it builds. Compiling a route's schemas is most of what building the app costs (about
 * 1.5 s of CPU for the serializers and 0.4 s for the validators); a server builds one app, but a
 * test process builds dozens, each with the same routes. A compiled function depends only on the
 * schema it was compiled from (and, for a serializer, the shared schemas it may `$ref`), so it is
 * looked up by their JSON text: a different schema under the same route is compiled anew.
 */
const validators = new Map<string, ReturnType<FastifySchemaCompiler<unknown>>>();
const serializers = new Map<string, ReturnType<FastifySerializerCompiler<unknown>>>();
/** The validators and serializers not compiled yet (they compile when their route first needs them), by key. */
const uncompiledValidators = new Map<string, () => void>();
const uncompiledSerializers = new Map<string, () => void>();

/**
 * Each schema's JSON text as a small number, equal texts the same number, the text of a schema
 * object read once: every app reuses the same schema objects, and every Fastify context that adds
 * a shared schema hands the serializer factory all of them again. Writing them all out for each
 * context and route was about 80 ms of CPU per app built (2026-11-28). Schemas are not changed
 * once routes hold them.
 */
const idsByText = new Map<string, number>();
const idsByObject = new WeakMap<object, number>();

function schemaId(schema: unknown): number {
  const isObject = typeof schema === 'object' && schema !== null;
  const known = isObject ? idsByObject.get(schema) : undefined;
  if (known !== undefined) return known;
  // `true`, `false` (schemas too) and no options at all: apart from every object's text.
  const text = isObject ? JSON.stringify(schema) : `\0${String(schema)}`;
  let id = idsByText.get(text);
  if (id === undefined) {
    id = idsByText.size;
    idsByText.set(text, id);
  }
  if (isObject) idsByObject.set(schema, id);
  return id;
}

type Validator = ReturnType<FastifySchemaCompiler<unknown>>;

/**
 * `compile`, remembered per (kind, HTTP part, schema), each validator compiled when its route
 * first validates that part, as serializers are ({@link cachedSerializerFactory}): compiling them
 * all cost `svc serve` about 0.35 s of CPU at every start (2026-11-28). `kind` names the
 * compiler's settings: two compilers that treat the same schema differently must pass different
 * kinds.
 *
 * @example
 * // platform/route-validation.ts: every route of the app, through the schema controller's factory
 * const svc = cachedValidatorCompiler('svc', createValidatorCompiler());
 */
export function cachedValidatorCompiler(
  kind: string,
  compile: FastifySchemaCompiler<unknown>,
): FastifySchemaCompiler<unknown> {
  return (route) => {
    const key = `${kind}\0${route.httpPart ?? ''}\0${schemaId(route.schema)}`;
    let validate = validators.get(key);
    if (!validate) {
      let compiled: Validator | undefined;
      const compileOnce = () => {
        uncompiledValidators.delete(key);
        compiled ??= compile(route);
        return compiled;
      };
      // Fastify reads a failed validation's errors from the function it called.
      const lazy: Validator = Object.assign(
        (data: unknown) => {
          const run = compiled ?? compileOnce();
          const result = run(data);
          lazy.errors = run.errors ?? null;
          return result;
        },
        { errors: null },
      );
      validate = lazy;
      validators.set(key, validate);
      uncompiledValidators.set(key, compileOnce);
    }
    return validate;
  };
}

type SerializerFactory = ReturnType<typeof SerializerSelector>;

/**
 * Fastify's own serializer factory (fast-json-stringify), with each serializer compiled when its
 * route first answers with that status, then remembered. Building the app compiles none: a server
 * answers with a small part of its routes' response schemas, and compiling them all cost about
 * 0.6 s of CPU at every start of `svc serve` (2026-11-28). {@link compileSchemas} compiles the
 * rest, for the test that every schema compiles. For
 * `schemaController.compilersFactory.buildSerializer`; `build` is Fastify's factory (a test may
 * count its compilations).
 */
export function cachedSerializerFactory(build: SerializerFactory = SerializerSelector()): SerializerFactory {
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options);
    // The shared schemas by name, in their order, and the options: as their JSON text would.
    const shared = Object.entries(externalSchemas ?? {}).map(([name, schema]) => `${name}=${schemaId(schema)}`);
    const prefix = `${shared.join(',')}\0${schemaId(options ?? null)}`;
    return (route) => {
      const key = `${prefix}\0${schemaId(route.schema)}`;
      let serialize = serializers.get(key);
      if (!serialize) {
        let compiled: ((data: unknown) => string) | undefined;
        const compileOnce = () => {
          uncompiledSerializers.delete(key);
          compiled ??= compile(route);
          return compiled;
        };
        serialize = (data: unknown) => (compiled ?? compileOnce())(data);
        serializers.set(key, serialize);
        uncompiledSerializers.set(key, compileOnce);
      }
      return serialize;
    };
  };
}

/**
 * Compiles every validator and response serializer of this process's apps that has not been used
 * yet, and returns how many: a schema Ajv or fast-json-stringify refuses throws here, as it did
 * when apps compiled them all while being built.
 *
 * @example
 * const app = await createTestApp();
 * compileSchemas(); // throws on a route schema that does not compile
 */
export function compileSchemas(): number {
  const pending = [...uncompiledValidators.values(), ...uncompiledSerializers.values()];
  for (const compile of pending) compile();
  return pending.length;
}

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

/**
 * `compile`, remembered per (kind, HTTP part, schema). `kind` names the compiler's settings: two
 * compilers that treat the same schema differently must pass different kinds.
 *
 * @example
 * app.setValidatorCompiler(cachedValidatorCompiler('svc', createValidatorCompiler()));
 */
export function cachedValidatorCompiler(
  kind: string,
  compile: FastifySchemaCompiler<unknown>,
): FastifySchemaCompiler<unknown> {
  return (route) => {
    const key = `${kind}\0${route.httpPart ?? ''}\0${JSON.stringify(route.schema)}`;
    let validate = validators.get(key);
    if (!validate) {
      validate = compile(route);
      validators.set(key, validate);
    }
    return validate;
  };
}

type SerializerFactory = ReturnType<typeof SerializerSelector>;

/**
 * Fastify's own serializer factory (fast-json-stringify), with each compiled serializer
 * remembered. For `schemaController.compilersFactory.buildSerializer`.
 */
export function cachedSerializerFactory(): SerializerFactory {
  const build = SerializerSelector();
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options);
    const prefix = JSON.stringify([externalSchemas ?? null, options ?? null]);
    return (route) => {
      const key = `${prefix}\0${JSON.stringify(route.schema)}`;
      let serialize = serializers.get(key);
      if (!serialize) {
        serialize = compile(route);
        serializers.set(key, serialize);
      }
      return serialize;
    };
  };
}

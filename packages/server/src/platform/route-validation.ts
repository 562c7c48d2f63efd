import type { FastifyInstance, FastifySchemaCompiler, FastifyServerOptions, RouteOptions } from 'fastify';
import { cachedValidatorCompiler } from './schema-cache.js';
import { createValidatorCompiler } from './validation.js';

/** The parts of a request a route's schema may validate. */
const PARTS = ['params', 'querystring', 'headers', 'body'] as const;

/** One validated part of one route, as kept in `app.validatedParts` for tests and tooling. */
export interface ValidatedPart {
  method: string;
  url: string;
  part: (typeof PARTS)[number];
  /** Whether svc's compiler compiled its validator (known once the app is ready). */
  svc: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every request part a route's schema validates, in registration order. */
    validatedParts: ValidatedPart[];
  }
}

type Validator = ReturnType<FastifySchemaCompiler<unknown>>;
type ValidatorFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']
>;

/** svc's validator compiler for one app, and the check that every route's schema went through it. */
export interface RouteValidation {
  /**
   * For Fastify's `schemaController.compilersFactory.buildValidator`. Set there, not with
   * `setValidatorCompiler`: an encapsulated plugin's context rebuilds its compiler from this factory
   * whenever a schema is added to it (the app's `addSchema` reaches every context registered before),
   * and `setValidatorCompiler` does not reach that factory, so such a plugin's routes were validated
   * by Fastify's default Ajv, which coerces a body's types.
   */
  buildValidator: ValidatorFactory;
  /**
   * Records every route's validated parts in `app.validatedParts` and refuses to start (`ready`
   * rejects) when one was compiled by any other compiler: a route's own `validatorCompiler`, or a
   * plugin's `setValidatorCompiler`. Install before the first route.
   */
  install(app: FastifyInstance): void;
}

/** `METHOD url` of each method a route (or a route definition handed to a compiler) names. */
function routeKeys(method: string | string[], url: string): string[] {
  return [method].flat().map((one) => `${one} ${url}`);
}

/**
 * A form body (multipart/form-data) is not parsed by Fastify: the handler reads it from the stream
 * and checks its fields, so the schema only documents it and the part arrives empty. A route that
 * also takes JSON has the JSON validated as any body.
 */
function formBody(validate: Validator | undefined): Validator {
  if (!validate) return () => true;
  const form: Validator = Object.assign(
    (data: unknown) => {
      if (data === undefined || data === null) return true;
      const ok = validate(data);
      form.errors = validate.errors ?? null;
      return ok;
    },
    { errors: null },
  );
  return form;
}

/**
 * The one validator compiler of every route (platform/validation.ts: bodies without type coercion,
 * unbounded numbers bounded), shared compiled functions (platform/schema-cache.ts), and the route
 * walk that keeps it so.
 *
 * @example
 * const validation = createRouteValidation();
 * const app = Fastify({ schemaController: { compilersFactory: { buildValidator: validation.buildValidator } } });
 * validation.install(app);
 */
export function createRouteValidation(): RouteValidation {
  const compile = cachedValidatorCompiler('svc', createValidatorCompiler());
  /** `METHOD url part` of every part this app's compiler compiled. */
  const compiled = new Set<string>();
  /** Routes that take multipart/form-data: whether they take a JSON body too. */
  const forms = new Map<string, boolean>();
  const svc: FastifySchemaCompiler<unknown> = (route) => {
    const keys = routeKeys(route.method, route.url);
    for (const key of keys) compiled.add(`${key} ${route.httpPart ?? ''}`);
    const takesJson = route.httpPart === 'body' ? forms.get(keys[0] ?? '') : undefined;
    if (takesJson === undefined) return compile(route);
    return formBody(takesJson ? compile(route) : undefined);
  };

  function install(app: FastifyInstance): void {
    const parts: ValidatedPart[] = [];
    app.decorate('validatedParts', parts);
    app.addHook('onRoute', (route: RouteOptions) => {
      const schema = route.schema as (Record<string, unknown> & { consumes?: string[] }) | undefined;
      if (!schema) return;
      const consumes = schema.consumes ?? [];
      for (const method of [route.method].flat()) {
        if (consumes.includes('multipart/form-data'))
          forms.set(`${method} ${route.url}`, consumes.includes('application/json'));
        for (const part of PARTS)
          if (schema[part] !== undefined) parts.push({ method, url: route.url, part, svc: false });
      }
    });
    app.addHook('onReady', async () => {
      for (const entry of parts) entry.svc = compiled.has(`${entry.method} ${entry.url} ${entry.part}`);
      const outside = parts.filter((entry) => !entry.svc);
      if (outside.length > 0)
        throw new Error(
          `route schemas validated outside svc's compiler (platform/route-validation.ts): ${outside
            .map((entry) => `${entry.method} ${entry.url} ${entry.part}`)
            .join(', ')}`,
        );
    });
  }

  // Fastify types the factory as Ajv's (its compile takes a bare schema); it calls it with route definitions.
  return { buildValidator: (() => svc) as unknown as ValidatorFactory, install };
}

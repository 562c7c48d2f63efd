/* global module */
/**
 * Import-cycle checks, run by `npm run lint` (`npm run lint:cycles`): dependency-cruiser over every
 * package's sources (tests excluded).
 *
 * 1. File level: no runtime import cycle (a cycle made only of `import type` edges is fine: it
 *    vanishes at run time). There is none.
 * 2. Module level: no cycle between the folders of `packages/server/src/modules/` (every import
 *    counts, types too: a module that needs another's types depends on it). There is none, and no
 *    allow-list: when two modules need each other, the lower one defines an interface the upper
 *    implements, a port of `ModulePorts` (service-context.ts) wired in context.ts
 *    (`ctx.completions`, `ctx.submitAssignment`, `ctx.evidenceSubjects`, `ctx.grounding`), or the
 *    shared part moves to a third place (STYLE.md). The last cycles ended on 2026-11-25
 *    (docs/decisions.md, "Module cycles").
 * 3. `platform/` sits below the modules: it imports none of them (shared schema pieces and the
 *    permission model live in platform/ so that every module can use them), nor
 *    service-context.ts, whose module half names their types: it takes `PlatformServices`
 *    (platform/services.ts).
 * 4. `modules/work/` sits below the modules that own work (rule `work-is-below`).
 * 5. `@svc/protocol/rest` (packages/protocol/src/rest/) is browser-safe (rule `rest-is-browser-safe`).
 * 6. `context.ts` is the composition root: modules and platform/ take the context's type from
 *    service-context.ts and never import the file that wires them (rule `context-is-the-root`).
 *    Type-only imports count here: importing context.ts for a type is what the rule ends.
 */

const MODULES = 'packages/server/src/modules';
const SERVER = 'packages/server/src';

const runtimeCycle = { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } };

module.exports = {
  forbidden: [
    {
      name: 'no-runtime-cycle',
      severity: 'error',
      comment: 'A runtime import cycle between files: move the shared part to a third file.',
      from: {},
      to: runtimeCycle,
    },
    {
      name: 'no-module-cycle',
      scope: 'folder',
      severity: 'error',
      comment:
        'An import cycle between server modules: depend on an interface the lower module defines (a port of ModulePorts in service-context.ts, wired in context.ts), or move the shared part to a third module or platform/ (STYLE.md).',
      from: { path: `^${MODULES}/[^/]+$` },
      to: { path: `^${MODULES}/[^/]+$`, circular: true },
    },
    {
      name: 'platform-is-below',
      severity: 'error',
      comment:
        'packages/server/src/platform/ sits below the modules and imports none of them, nor service-context.ts (its module half names their types): take PlatformServices (platform/services.ts), move what it needs into platform/, or have the module hand it in at start-up (context.ts).',
      from: { path: `^${SERVER}/platform/` },
      to: { path: [`^${MODULES}/`, `^${SERVER}/service-context\\.ts$`] },
    },
    {
      name: 'context-is-the-root',
      severity: 'error',
      comment:
        'context.ts is the composition root: it imports every module, and only the entry points (server.ts, index.ts, the test harness, benches) import it. A module or platform/ file takes the type from service-context.ts (ServiceContext, ModulePorts) or platform/services.ts (PlatformServices).',
      from: { path: `^${SERVER}/(modules|platform)/` },
      to: { path: `^${SERVER}/context\\.ts$` },
    },
    {
      name: 'work-is-below',
      severity: 'error',
      comment:
        'modules/work/ owns work_items and the node protocol below the modules that own the work: it must not import gateway, jobs or scheduler (they implement the completion interface work/completion.ts defines, registered at start-up), nor receipts beyond its store and schemas (the receipts table and its wire shapes sit below work).',
      from: { path: `^${MODULES}/work/` },
      to: { path: `^${MODULES}/(gateway|jobs|scheduler)/|^${MODULES}/receipts/(?!(store|schemas)\\.ts$)` },
    },
    {
      name: 'rest-is-browser-safe',
      severity: 'error',
      comment:
        "packages/protocol/src/rest/ is the browser-safe `@svc/protocol/rest` entry the dashboard bundles: it imports TypeBox and its own files only (no Node.js built-ins, nothing else of protocol's).",
      from: { path: '^packages/protocol/src/rest/' },
      to: { pathNot: ['^packages/protocol/src/rest/', '(^|/)node_modules/@sinclair/typebox/'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Tests are not part of a module's dependencies (a scheduler test may drive the gateway).
    exclude: { path: '(^|/)(node_modules|dist)/|\\.test\\.tsx?$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'node', 'default'],
      extensions: ['.ts', '.tsx', '.js', '.mjs'],
    },
  },
};

/* global module */
/**
 * Import-cycle checks, run by `npm run lint` (`npm run lint:cycles`): dependency-cruiser over every
 * package's sources (tests excluded).
 *
 * 1. File level: no runtime import cycle (a cycle made only of `import type` edges is fine: it
 *    vanishes at run time). There is none.
 * 2. Module level: no cycle between the folders of `packages/server/src/modules/` (every import
 *    counts, types too: a module that needs another's types depends on it). Today's cycles are
 *    recorded as known debt, edge by edge, so that no NEW one can land: an import from one module
 *    to another that closes a cycle fails unless that edge is listed here. Remove an edge from the
 *    list when it is gone; never add one. `modules/work/` (the node protocol, with one completion
 *    interface that jobs and the gateway implement) ended the gateway <-> receipts,
 *    nodes <-> receipts and nodes <-> scheduler cycles, and jobs' submission-time assignment
 *    through `jobs/assignment.ts` (the scheduler implements it) the jobs <-> scheduler one
 *    (2026-11-25): receipts, scheduler, attestation and work are in no cycle. The schema pieces
 *    every module shares (`StringEnum`, `MessageResponse`) and the permission model (`scopes.ts`,
 *    which platform/route-auth.ts needs) moved from modules/auth to platform/, and the API keys'
 *    form and digest (`keys/credentials.ts`) to keys, which ended auth <-> billing / keys / nodes
 *    and nodes <-> billing / system (2026-11-25). Evidence reads the subjects of its runs (a job's
 *    view, a gateway request's summary) through `evidence/subjects.ts`, which jobs and the gateway
 *    implement (`ctx.evidenceSubjects`): capture, evidence and jobs are in no cycle.
 */

const MODULES = 'packages/server/src/modules';

/**
 * Module edges that are part of a cycle today (2026-11-25), by importing module. Each line names
 * the modules it imports that import it back, directly or through others.
 */
const KNOWN_MODULE_CYCLE_EDGES = {
  // gateway <-> knowledge: grounded chat.
  gateway: ['knowledge'],
  knowledge: ['gateway'],
};

const runtimeCycle = { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } };
const moduleFolder = (name) => `^${MODULES}/${name}$`;
const known = Object.keys(KNOWN_MODULE_CYCLE_EDGES);

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
      name: 'no-new-module-cycle',
      scope: 'folder',
      severity: 'error',
      comment:
        'A new import cycle between server modules: depend on an interface the lower module defines, or move the shared part to a third module (STYLE.md).',
      from: { path: `^${MODULES}/[^/]+$`, pathNot: `^${MODULES}/(${known.join('|')})$` },
      to: { path: `^${MODULES}/[^/]+$`, circular: true },
    },
    {
      name: 'work-is-below',
      severity: 'error',
      comment:
        'modules/work/ owns work_items and the node protocol below the modules that own the work: it must not import gateway, jobs or scheduler (they implement the completion interface work/completion.ts defines, registered at start-up), nor receipts beyond its store and schemas (the receipts table and its wire shapes sit below work).',
      from: { path: `^${MODULES}/work/` },
      to: { path: `^${MODULES}/(gateway|jobs|scheduler)/|^${MODULES}/receipts/(?!(store|schemas)\\.ts$)` },
    },
    ...Object.entries(KNOWN_MODULE_CYCLE_EDGES).map(([from, allowed]) => ({
      name: 'no-new-module-cycle',
      scope: 'folder',
      severity: 'error',
      comment: `A new import cycle from modules/${from}: only the edges of KNOWN_MODULE_CYCLE_EDGES are known debt.`,
      from: { path: moduleFolder(from) },
      to: { path: `^${MODULES}/[^/]+$`, pathNot: `^${MODULES}/(${allowed.join('|')})$`, circular: true },
    })),
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

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
 *    list when it is gone (issue 22 point 5: `modules/work/` with one completion interface ends
 *    the gateway <-> receipts, nodes <-> receipts and jobs <-> scheduler ones); never add one.
 */

const MODULES = 'packages/server/src/modules';

/**
 * Module edges that are part of a cycle today (2026-11-25), by importing module. Each line names
 * the modules it imports that import it back, directly or through others.
 */
const KNOWN_MODULE_CYCLE_EDGES = {
  // Many cycles run through auth/schemas.ts (shared bodies such as MessageResponse live in auth)
  // and auth's own imports: keys/service (key checks), billing/store (signup's account),
  // nodes/node-auth (signed node requests); also through platform/, which imports modules/auth.
  attestation: ['evidence', 'nodes'],
  auth: ['billing', 'keys', 'nodes'],
  billing: ['auth'],
  capture: ['auth', 'evidence'],
  // evidence reads the rows of jobs, gateway requests, receipts and the ledger it reports on.
  evidence: ['auth', 'billing', 'gateway', 'jobs', 'receipts', 'system'],
  // gateway <-> receipts: receipts/service completes a gateway request through gateway/settle;
  // gateway <-> knowledge: grounded chat. Both wait for modules/work/ and its completion interface.
  // gateway -> scheduler went away when the poll hand-over type (Handoff) moved to modules/work/.
  gateway: ['auth', 'billing', 'evidence', 'knowledge', 'nodes', 'receipts', 'system'],
  // jobs <-> scheduler: a submission assigns to a waiting node (scheduler/service); the scheduler
  // reads jobs/store, jobs/states and jobs/delivery.
  jobs: ['auth', 'billing', 'capture', 'evidence', 'nodes', 'scheduler', 'system'],
  keys: ['auth'],
  knowledge: ['evidence', 'gateway'],
  // nodes <-> receipts: nodes/routes serves the node protocol with receipts/service and
  // scheduler/node-work, which read nodes/store.
  nodes: ['auth', 'billing', 'receipts', 'scheduler', 'system'],
  // receipts -> scheduler went away when modules/work/ took over work_items (2026-11-25).
  receipts: ['attestation', 'billing', 'capture', 'evidence', 'gateway', 'jobs', 'nodes'],
  scheduler: ['attestation', 'capture', 'evidence', 'jobs', 'nodes'],
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
        'modules/work/ owns work_items below the modules that use it: it must not import gateway, jobs, receipts, scheduler or channel (they call it; a completion interface it defines lets it call back).',
      from: { path: `^${MODULES}/work/` },
      to: { path: `^${MODULES}/(gateway|jobs|receipts|scheduler|channel)/` },
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

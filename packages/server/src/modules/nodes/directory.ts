import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus } from '../../platform/bus.js';
import type { Queryable } from '../../platform/db/index.js';
import { NODE_LIVE_SECONDS } from '../system/service.js';
import { findRoutingNode, liveRoutingNodes, recentlySeenNodes, type RoutingNodeRow } from './store.js';

/** A live node serving a model, as routing weighs it (gateway/routing.ts `RouteCandidate`). */
export interface DirectoryCandidate {
  id: string;
  /** The operator's organization (earns on the work). */
  org_id: string;
  country: string | null;
  region: string | null;
  gpu_model: string | null;
  /** The chat request fields beyond the plain ones its engine honours for the model (none declared: none). */
  chat_fields: readonly string[];
  /** Verified, and the verification has not lapsed. */
  attestation_verified: boolean;
  open_work: number;
}

/**
 * The nodes as this instance knows them, so that a gateway request is routed without a statement
 * (docs/gateway.md, "Routing without a statement"). A deliberate cache, kept exact enough:
 *
 * - **This instance's writes** (registration, a heartbeat's models, an attestation) and every
 *   signed call it serves (`seen`) change it at once.
 * - **Any other write** to what routing reads of a node (another instance's, an operator's
 *   statement, a deletion) is announced by the store itself (trigger of
 *   migrations/0160_nodes_changed.sql on the bus's `nodes` topic); the node is read again, and a
 *   routing decision waits for the reads in flight.
 * - **Liveness** is judged at each decision against the clock: a node stops being routed to
 *   NODE_LIVE_SECONDS after its last signed call this instance saw, or that the store recorded
 *   (the calls recorded since are read every `refreshMs`: calls served by other instances reach
 *   it that late).
 * - **A lost announcement** (PostgreSQL: the listening connection dropped) is repaired by a read
 *   of every live node's routing columns every NODE_DIRECTORY_FULL_READ_MS.
 * - **Open work** is this instance's own gateway attempts per node, counted live as they open and
 *   end (`localOpen`), plus the store's count of every other open work (read every `refreshMs`:
 *   job leases and other instances' requests count from then). The store's read leaves out the
 *   work of this instance's running attempts (`localWork`): their rows are written behind the
 *   dispatch, so the read may or may not see them, and an attempt must count once either way
 *   (one opened while the read runs, and seen by it, counts twice until the next refresh).
 *   Routing is a preference: the node's capacity and leases stay the truth.
 */
export interface NodeDirectory {
  /** Live nodes serving `model`, with their open work; waits for node reads in flight. */
  serving(model: string, now?: number): Promise<DirectoryCandidate[]>;
  /** This instance wrote the node (registration): known at once. */
  put(row: RoutingNodeRow): void;
  /** A signed call of the node, served here (with the models of a heartbeat): live from now. */
  seen(nodeId: string, heartbeat?: { models?: string[] | undefined }): void;
  /** The node changed in the store: read again (resolves when read). */
  changed(nodeId: string): Promise<void>;
  /**
   * Resolves once every change the store announced before the call has been read here: a message
   * of its own sent through the bus came back (the bus keeps the order of committed messages), and
   * the reads it follows are done. For a caller that wrote a node on another connection.
   */
  caughtUp(): Promise<void>;
  /**
   * Reads the nodes' calls recorded since the last refresh and everyone's open work again (every
   * `refreshMs` by itself); every live node's routing columns every NODE_DIRECTORY_FULL_READ_MS.
   */
  refresh(): Promise<void>;
  /** When the last refresh read the store (ms since the epoch), 0 before the first. */
  readonly refreshedAt: number;
  close(): Promise<void>;
}

/** How often the nodes' last signed calls and the open work counts are read again. */
export const NODE_DIRECTORY_REFRESH_MS = 1_000;
/**
 * How often a refresh reads every live node's routing columns, not only the calls recorded since
 * the last one: the repair of a change whose announcement was lost (a dropped listening connection).
 */
export const NODE_DIRECTORY_FULL_READ_MS = 30_000;

/** What a node that declares nothing honours beyond the plain chat fields: one shared empty list. */
const NO_FIELDS: readonly string[] = Object.freeze([]);

interface Entry {
  row: RoutingNodeRow;
  /** The directory's write counter when this entry was last written (a refresh older than that keeps it). */
  writeNo: number;
}

/**
 * Builds the directory and reads the store once (one per process: `ctx.nodeDirectory`).
 * `localOpen` is this instance's open gateway attempts per node (gateway/attempts.ts), read live,
 * and `localWork` the work ids of those attempts; `openWork` reads the store's open work per node
 * but the work ids it is given (work/store.ts `openWorkByNode`: modules/work owns `work_items` and
 * sits above this module, so the reader is handed in).
 *
 * @example
 * const directory = await createNodeDirectory(
 *   { db, bus, log },
 *   {
 *     localOpen: () => hub.attempts.openPerNode,
 *     localWork: () => hub.attempts.openWorkIds(),
 *     openWork: (except) => openWorkByNode(db, except),
 *   },
 * );
 * await directory.serving('tinyllama'); // [{ id: 'node_...', open_work: 0, ... }]
 */
export async function createNodeDirectory(
  ctx: { db: Queryable; bus: Bus; log: Pick<Logger, 'warn'> },
  options: {
    localOpen?: () => ReadonlyMap<string, number>;
    localWork?: () => readonly string[];
    openWork?: (except: readonly string[]) => Promise<ReadonlyMap<string, number>>;
    refreshMs?: number;
  } = {},
): Promise<NodeDirectory> {
  const refreshMs = options.refreshMs ?? NODE_DIRECTORY_REFRESH_MS;
  const localOpen = options.localOpen ?? (() => new Map<string, number>());
  const localWork = options.localWork ?? (() => []);
  const openWork = options.openWork ?? (async () => new Map<string, number>());
  const entries = new Map<string, Entry>();
  /** Last signed call served here, per node (ms): newer than the store's `last_seen` by up to a refresh. */
  const seenAt = new Map<string, number>();
  let writes = 0;
  /** The store's open work per node at the last refresh, but this instance's running attempts'. */
  let storedOpen: ReadonlyMap<string, number> = new Map<string, number>();
  let refreshedAt = 0;
  let fullReadAt = 0;
  const rereads = new Map<string, { again: boolean; done: Promise<void> }>();

  const write = (row: RoutingNodeRow) => entries.set(row.id, { row, writeNo: ++writes });

  const reread = (nodeId: string): Promise<void> => {
    const running = rereads.get(nodeId);
    if (running) {
      running.again = true;
      return running.done;
    }
    const state = { again: false, done: Promise.resolve() };
    state.done = (async () => {
      try {
        do {
          state.again = false;
          const row = await findRoutingNode(ctx.db, nodeId);
          // The store is the truth here, last_seen included (a node marked down by hand).
          seenAt.delete(nodeId);
          if (row) write(row);
          else entries.delete(nodeId);
        } while (state.again);
      } catch (err) {
        ctx.log.warn({ err, node_id: nodeId }, 'node directory: could not read a changed node');
      } finally {
        rereads.delete(nodeId);
      }
    })();
    rereads.set(nodeId, state);
    return state.done;
  };

  let refreshing: Promise<void> | undefined;
  const refresh = (): Promise<void> => {
    refreshing ??= (async () => {
      const since = writes;
      const at = Date.now();
      const full = at - fullReadAt >= NODE_DIRECTORY_FULL_READ_MS;
      // Calls recorded since the last refresh, with a second to spare (the store's clock and ours).
      const window = Math.ceil((at - refreshedAt) / 1000) + 1;
      const [rows, seen, open] = await Promise.all([
        full ? liveRoutingNodes(ctx.db, NODE_LIVE_SECONDS) : [],
        full ? [] : recentlySeenNodes(ctx.db, window),
        openWork(localWork()),
      ]);
      for (const row of rows) {
        // A node written or read again since this read began is newer here than in `rows`.
        const known = entries.get(row.id);
        if (!known || known.writeNo <= since) entries.set(row.id, { row, writeNo: known?.writeNo ?? 0 });
      }
      for (const { id, last_seen } of seen) {
        const known = entries.get(id);
        if (!known)
          void reread(id); // live again, or new to this instance
        else if (known.writeNo <= since) known.row = { ...known.row, last_seen };
      }
      storedOpen = open;
      refreshedAt = at;
      if (full) fullReadAt = at;
    })().finally(() => (refreshing = undefined));
    return refreshing;
  };

  const echoes = new Map<string, () => void>();
  // Listening before the first read: a change committed in between is read again, not missed.
  const unsubscribe = await ctx.bus.subscribe('nodes', (payload) => {
    if (payload.startsWith('caught-up:')) echoes.get(payload)?.();
    else void reread(payload);
  });
  try {
    await refresh();
  } catch (err) {
    await unsubscribe().catch(() => undefined);
    throw err;
  }
  const timer = setInterval(
    () => void refresh().catch((err: unknown) => ctx.log.warn({ err }, 'node directory: refresh failed')),
    refreshMs,
  );
  timer.unref();

  return {
    async serving(model, now = Date.now()) {
      if (rereads.size > 0) await Promise.all([...rereads.values()].map((r) => r.done));
      const local = localOpen();
      const out: DirectoryCandidate[] = [];
      for (const { row } of entries.values()) {
        if (!row.models.includes(model)) continue;
        const lastSeen = Math.max(row.last_seen?.getTime() ?? 0, seenAt.get(row.id) ?? 0);
        if (now - lastSeen > NODE_LIVE_SECONDS * 1000) continue;
        out.push({
          id: row.id,
          org_id: row.org_id,
          country: row.country,
          region: row.region,
          gpu_model: row.gpu_model,
          chat_fields: row.chat_fields?.[model] ?? NO_FIELDS,
          attestation_verified:
            row.attestation_verified &&
            row.attestation_expires_at !== null &&
            row.attestation_expires_at.getTime() > now,
          open_work: (storedOpen.get(row.id) ?? 0) + (local.get(row.id) ?? 0),
        });
      }
      return out;
    },
    put(row) {
      seenAt.delete(row.id);
      write(row);
    },
    seen(nodeId, heartbeat) {
      seenAt.set(nodeId, Date.now());
      const known = entries.get(nodeId);
      if (!known) {
        // Registered on another instance, or not live at the last refresh: read it.
        void reread(nodeId);
        return;
      }
      if (heartbeat?.models) write({ ...known.row, models: heartbeat.models });
    },
    changed: reread,
    async caughtUp() {
      const tag = `caught-up:${randomUUID()}`;
      const heard = new Promise<void>((resolve) => echoes.set(tag, resolve));
      try {
        await ctx.bus.publish('nodes', tag);
        await heard;
      } finally {
        echoes.delete(tag);
      }
      await Promise.all([...rereads.values()].map((r) => r.done));
    },
    refresh,
    get refreshedAt() {
      return refreshedAt;
    },
    async close() {
      clearInterval(timer);
      await refreshing?.catch(() => undefined);
      await Promise.all([...rereads.values()].map((r) => r.done));
      await unsubscribe().catch(() => undefined);
    },
  };
}

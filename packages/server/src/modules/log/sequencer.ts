import { checkpointText, MERKLE_EMPTY_ROOT, signNote } from '@svc/protocol';
import type { Logger } from 'pino';
import type { Db, Queryable } from '../../platform/db/index.js';
import type { PlatformSecrets } from '../../platform/secrets.js';
import {
  insertCheckpoint,
  latestCheckpoint,
  pendingLeaves,
  releaseLease,
  storedHashesAt,
  takeLease,
  writeBatch,
} from './store.js';
import { appendLeaves, olderHashesNeeded } from './tree.js';

/** The most leaves one checkpoint adds; a longer backlog is taken over the next ticks. */
export const LOG_BATCH_LIMIT = 20_000;

/** What a tick did: whether this instance held the lease, and the checkpoint it signed. */
export interface TickResult {
  held: boolean;
  signed?: { tree_size: number; added: number };
}

/**
 * One sequencing step, in one transaction: takes or renews the lease (its row stays locked until
 * the commit, so two instances never number leaves at once, whatever their clocks say), numbers
 * the pending leaves in arrival order from the stored tree's size, stores the hashes they add and
 * signs a checkpoint of the new tree with the active platform key under `origin`. An empty log
 * gets one checkpoint of size 0 (the root of no records, SHA-256 of nothing).
 *
 * @example
 * await sequenceOnce(tx, { holder: 'inst_1', leaseMs: 5000, origin, secrets });
 */
export async function sequenceOnce(
  tx: Queryable,
  options: { holder: string; leaseMs: number; origin: string; secrets: PlatformSecrets; limit?: number },
): Promise<TickResult> {
  const size = await takeLease(tx, options.holder, options.leaseMs);
  if (size === undefined) return { held: false };
  const pending = await pendingLeaves(tx, options.limit ?? LOG_BATCH_LIMIT);
  if (pending.length === 0) {
    if (size > 0 || (await latestCheckpoint(tx))) return { held: true };
    await sign(tx, options, 0, Buffer.from(MERKLE_EMPTY_ROOT, 'hex'));
    return { held: true, signed: { tree_size: 0, added: 0 } };
  }
  const older = await storedHashesAt(tx, olderHashesNeeded(size, pending.length));
  const appended = appendLeaves(size, pending, older);
  const treeSize = size + pending.length;
  await writeBatch(tx, { leaves: appended.leaves, hashes: appended.hashes, treeSize });
  await sign(tx, options, treeSize, appended.root);
  return { held: true, signed: { tree_size: treeSize, added: pending.length } };
}

async function sign(
  tx: Queryable,
  options: { origin: string; secrets: PlatformSecrets },
  treeSize: number,
  root: Buffer,
): Promise<void> {
  const note = signNote(
    checkpointText(options.origin, treeSize, root),
    options.origin,
    options.secrets.active.privateKey,
  );
  await insertCheckpoint(tx, {
    tree_size: treeSize,
    root_hash_hex: root.toString('hex'),
    origin: options.origin,
    note,
  });
}

/** The running sequencer loop of one instance. */
export interface LogSequencer {
  /** Asks for a tick as soon as the interval since the last one allows (a bundle waits for its leaf). */
  nudge(): void;
  /** Stops the loop, waits for a running tick and gives the lease up. */
  stop(): Promise<void>;
}

/**
 * Runs {@link sequenceOnce} every `intervalMs` on this instance: the lease holder numbers and
 * signs, the others only try the lease (one statement), so that one of them takes over within
 * `leaseMs` of the holder's stop or `kill -9`.
 *
 * @example
 * const sequencer = startLogSequencer({ db, log, secrets, origin, intervalMs: 1000, leaseMs: 5000, holder: newId('inst') });
 */
export function startLogSequencer(deps: {
  db: Db;
  log: Logger;
  secrets: PlatformSecrets;
  origin: string;
  intervalMs: number;
  leaseMs: number;
  holder: string;
}): LogSequencer {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let lastStart = 0;
  const tick = async () => {
    lastStart = Date.now();
    try {
      await deps.db.transaction((tx) => sequenceOnce(tx, deps));
    } catch (err) {
      deps.log.error({ err }, 'transparency log: sequencing failed (retried at the next tick)');
    }
  };
  const schedule = (delayMs: number) => {
    if (stopped) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      running = running.then(tick).then(() => schedule(deps.intervalMs));
    }, delayMs);
    timer.unref();
  };
  schedule(0);
  return {
    nudge() {
      // A scheduled tick is moved earlier, never more often than every interval.
      if (timer) schedule(Math.max(0, lastStart + deps.intervalMs - Date.now()));
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
      await releaseLease(deps.db, deps.holder).catch((err: unknown) =>
        deps.log.warn({ err }, 'transparency log: could not give the sequencer lease up'),
      );
    },
  };
}

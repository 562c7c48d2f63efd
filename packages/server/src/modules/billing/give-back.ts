import type { Logger } from 'pino';
import type { Bus } from '../../platform/bus.js';
import type { Metrics } from '../../platform/metrics.js';

/**
 * How instances sharing a store ask each other for unused credit before a 402 (docs/billing.md,
 * billing/reservations.ts owns the money side). Messages on the bus topic `credit`:
 * `ask <org> <instance>` (give back what you do not use), `giving <org> <instance> <cents>` (set
 * aside, coming) and `gave <org> <instance> <cents>` (taken off the row; 0: nothing to give).
 */
export interface GiveBacks {
  /** Resolves once this instance hears the others' requests. */
  readonly ready: Promise<void>;
  /** The holders worth asking now: none while the organization is on hold, none that never answered. */
  askable(orgId: string, holders: string[]): string[];
  /**
   * Asks `holders` to give back their unused part and waits until each answered and what they
   * promised is given, `missing` cents came back, or `askWaitMs` passed without an answer (what
   * was promised in time is waited for up to 5 s). Concurrent asks of one organization share one.
   */
  ask(orgId: string, holders: string[], missing: number): Promise<void>;
  close(): Promise<void>;
}

/** What this instance sets aside when asked: `undefined` when it holds nothing of the organization. */
export type Serve = (orgId: string, asker: string) => { promised: number; given: Promise<number> } | undefined;

/** One request of this instance to the others. */
interface Ask {
  /** Instances asked that have not answered yet. */
  waiting: Set<string>;
  /** Instances that set cents aside for this ask and have not committed the give-back yet. */
  promised: Set<string>;
  /** Cents the answers gave back so far, and what the take was missing. */
  gained: number;
  missing: number;
  /** `askWaitMs` passed: instances that did not answer are no longer waited for. */
  late: boolean;
  finish(): void;
  done: Promise<void>;
}

/**
 * The longest a take waits for give-backs promised in time: each is one transaction, but it queues
 * for the account row behind the organization's holds in flight (about 250 ms measured under 40
 * concurrent submissions on 2 loaded CPUs).
 */
const PROMISED_WAIT_MS = 5_000;

/**
 * @example
 * const giveBacks = createGiveBacks({ bus, instanceId, askWaitMs: 100, ttlMs: 30_000, serve });
 * const holders = giveBacks.askable(orgId, others);
 * if (holders.length > 0) await giveBacks.ask(orgId, holders, missingCents); // then refill once more
 */
export function createGiveBacks(o: {
  bus: Bus;
  instanceId: string;
  askWaitMs: number;
  /** How long a holder that never answered is left out (a killed instance's row lives that long). */
  ttlMs: number;
  serve: Serve;
  log?: Logger;
  metrics?: Pick<Metrics, 'creditGiveBacks'>;
}): GiveBacks {
  const { bus, instanceId, askWaitMs, log, metrics } = o;
  const asks = new Map<string, Ask>();
  /** Holders that left a request unanswered: left out until then, or until heard from (a slow one answers late). */
  const silent = new Map<string, number>();
  /**
   * Organizations whose last request every holder answered with nothing to give (their credit is
   * all in requests in flight): not asked about until then, so a client hammering an exhausted
   * balance costs no message per request. What those requests release returns to the unreserved
   * balance, which a refill sees without asking.
   */
  const fruitless = new Map<string, number>();
  const prune = (map: Map<string, number>, now: number) => {
    for (const [key, until] of map) if (until <= now) map.delete(key);
  };

  const settle = (ask: Ask) => {
    if (ask.gained >= ask.missing || (ask.promised.size === 0 && (ask.waiting.size === 0 || ask.late))) ask.finish();
  };

  const answer = (orgId: string, verb: 'giving' | 'gave', cents: number) =>
    bus
      .publish('credit', `${verb} ${orgId} ${instanceId} ${cents}`)
      .catch((err: unknown) => log?.warn({ err, org_id: orgId }, 'credit reservations: could not answer a give-back'));

  const served = (orgId: string, asker: string) => {
    const served = o.serve(orgId, asker);
    if (!served) return;
    metrics?.creditGiveBacks.inc({ role: 'served' });
    if (served.promised > 0) void answer(orgId, 'giving', served.promised);
    void served.given.then((cents) => {
      log?.debug({ org_id: orgId, asker, cents }, 'credit reservations: gave back unused credit');
      return answer(orgId, 'gave', cents);
    });
  };

  const heard = (verb: string, orgId: string, from: string, cents: number) => {
    const ask = asks.get(orgId);
    if (!ask) return;
    ask.waiting.delete(from);
    if (verb === 'giving') {
      if (cents > 0) ask.promised.add(from);
    } else {
      ask.promised.delete(from);
      ask.gained += cents;
    }
    settle(ask);
  };

  const subscription = bus.subscribe('credit', (payload) => {
    const [verb, orgId, from, cents] = payload.split(' ');
    if (!orgId || !from || from === instanceId) return;
    // Heard from: alive, only slow if it missed a wait; it is asked (and waited for) again.
    silent.delete(from);
    if (verb === 'ask') served(orgId, from);
    else if (verb === 'giving' || verb === 'gave') heard(verb, orgId, from, Math.max(0, Number(cents) || 0));
  });
  const ready = subscription.then(() => undefined);

  return {
    ready,

    askable(orgId, holders) {
      const now = Date.now();
      if ((fruitless.get(orgId) ?? 0) > now) return [];
      return holders.filter((id) => (silent.get(id) ?? 0) <= now);
    },

    async ask(orgId, holders, missing) {
      const pending = asks.get(orgId);
      if (pending) return pending.done;
      await ready;
      let finish = () => undefined as void;
      const done = new Promise<void>((resolve) => (finish = resolve));
      const ask: Ask = {
        waiting: new Set(holders),
        promised: new Set(),
        gained: 0,
        missing,
        late: false,
        finish,
        done,
      };
      asks.set(orgId, ask);
      const started = Date.now();
      const answerTimer = setTimeout(() => {
        ask.late = true;
        settle(ask);
      }, askWaitMs);
      const promiseTimer = setTimeout(finish, Math.max(askWaitMs, PROMISED_WAIT_MS));
      metrics?.creditGiveBacks.inc({ role: 'sent' });
      try {
        await bus.publish('credit', `ask ${orgId} ${instanceId}`);
        await done;
      } catch (err) {
        log?.warn({ err, org_id: orgId }, 'credit reservations: could not ask other instances to give back');
      } finally {
        clearTimeout(answerTimer);
        clearTimeout(promiseTimer);
        asks.delete(orgId);
      }
      const now = Date.now();
      prune(silent, now);
      prune(fruitless, now);
      for (const id of ask.waiting) silent.set(id, now + o.ttlMs);
      if (ask.gained === 0 && ask.waiting.size === 0) fruitless.set(orgId, now + askWaitMs);
      log?.debug(
        {
          org_id: orgId,
          asked: holders.length,
          unanswered: ask.waiting.size,
          gained_cents: ask.gained,
          missing_cents: missing,
          waited_ms: now - started,
        },
        'credit reservations: asked other instances to give back unused credit',
      );
    },

    async close() {
      for (const ask of asks.values()) ask.finish();
      const unsubscribe = await subscription.catch(() => undefined);
      await unsubscribe?.();
    },
  };
}

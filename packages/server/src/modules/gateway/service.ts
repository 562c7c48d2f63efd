import { hop, type ModelUsage, type ToolCallDeltaWire } from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import type { CreditTicket } from '../billing/reservations.js';
import { followWork, type WorkFollower } from './follow.js';
import {
  followEvents,
  followStep,
  initialFollow,
  type Ending,
  type FollowAction,
  type FollowEvent,
  type FollowState,
} from './follow-step.js';
import type { LocalCompletion } from './hub.js';
import { openingsSettled } from './attempts.js';
import { enqueueOpening } from './flush.js';
import { estimateTokens, holdCents, type GatewayType } from './pricing.js';
import { chooseNode, type RouteAsk, type RouteCandidate, type RouteDecision } from './routing.js';
import { recordEvents, type EvidenceEvent } from '../evidence/recorder.js';
import { routedEvents, storeDerivedEvents } from './evidence-derived.js';
import {
  openedRequest,
  openedWork,
  routingFacts,
  ticketOf,
  workPayload,
  writeOpening,
  type Opening,
} from './opening.js';
import { endRequest } from './settle.js';
import { findGatewayRequest, setAttempt, staleRequests, type GatewayRequestRow } from './store.js';
import type { Handoff } from '../work/handoff.js';
import { insertLeasedWork, undispatchWork, type WorkRow } from '../work/store.js';
import { readWorkResult } from '../work/results.js';

/** A validated gateway request, ready to be routed. */
export interface GatewayCall {
  /** `chatcmpl-...`, `emb-...`, `tr-...`, `img-...`: the completion id and the receipt's job_id. */
  id: string;
  type: GatewayType;
  model: string;
  /** The work payload the node receives (docs/node-protocol.md). */
  payload: Record<string, unknown>;
  stream: boolean;
  route: Pick<RouteAsk, 'jurisdiction' | 'strict_jurisdiction' | 'requires_tee' | 'fields'>;
  /** The most the request can cost, in micro-CAD: what is held before dispatch. */
  maxMicro: number;
  /**
   * The most metering units its receipt may sign, for a type whose payload does not show it
   * (transcription: the audio's seconds); else `requestMaxUnits` reads it from the payload.
   */
  maxUnits?: number;
  /**
   * Facts recorded with the request and copied into its receipt's metadata, outside the SVC1
   * signature (retrieved-chunk provenance, what an ingestion embedding was for).
   */
  audit?: Record<string, unknown>;
  /** Runs inside the transaction that records the request, so that what it writes exists exactly when the request does. */
  onOpen?: (tx: Queryable) => Promise<void>;
  /** Events of what was done for the request before it was routed (retrieval), recorded after `request.received`. */
  evidence?: EvidenceEvent[];
}

/** One attempt: the work item and the node it is leased to. */
export interface Attempt {
  workId: string;
  node: RouteCandidate;
}

/**
 * A gateway id: `<prefix>-` and 26 time-ordered base32 characters, inside the SVC1 job_id
 * alphabet.
 *
 * @example
 * requestId('chatcmpl'); // 'chatcmpl-01jd4x8k2m7q9w3e5r6t8y0u2i'
 */
export function requestId(prefix: string): string {
  return `${prefix}-${newId('x').slice(2)}`;
}

/** `svc_node` of a response: who served it. */
export function svcNode(node: RouteCandidate) {
  return { node_id: node.id, gpu_model: node.gpu_model, region: node.region, country: node.country };
}

/** Routes over this instance's node directory: no statement (nodes/directory.ts). */
async function pickNode(ctx: ServiceContext, call: GatewayCall, exclude: string[]) {
  return chooseNode(await ctx.nodeDirectory.serving(call.model), { ...call.route, model: call.model, exclude });
}

/**
 * Why no node takes the request: a field no eligible node's engine honours is the request's to
 * change (400 naming it, OpenAI's `param`), anything else is capacity (503).
 */
function refusalError(decision: Extract<RouteDecision, { refusal: string }>): ApiError {
  if (decision.field === undefined) return new ApiError('no_capacity', decision.refusal);
  return new ApiError('invalid_request', decision.refusal, [
    { path: `/${decision.field}`, message: 'not supported by the engine of any live node serving the model' },
  ]);
}

/**
 * Routes a new request (DESIGN.md section 10), takes its maximum cost from this instance's credit
 * reservation of the organization (402 `insufficient_credits` decided in memory, before the 503
 * of routing; a statement only when the reservation must grow), then gets the work to the chosen
 * node before anything is stored: to a free granted slot of its channel (channel/standing.ts) or
 * its poll waiting in this process, at once, with a
 * ticket (gateway/ticket.ts) from which any instance can rebuild the opening should it be lost.
 * The opening (request row, `call.onOpen`, leased work, evidence run) goes to the group-commit
 * writer, ahead of the receipt's records (one writer, FIFO). No hold is written (DESIGN.md
 * section 7, revised 2026-11-27): the credit stays taken in memory until the request's charge has
 * committed or it ended without one (`RunningAttempts.open`), and the charge draws its cents from
 * this instance's reservation, which the request's row names (`credit`). When neither waits here,
 * the work waits in the store for its next poll or free slot (on any instance): it is announced
 * once the opening committed.
 */
export async function openRequest(
  ctx: ServiceContext,
  principal: Principal,
  call: GatewayCall,
  workId: string,
): Promise<Attempt> {
  const cents = holdCents(call.maxMicro);
  const routing = pickNode(ctx, call, []);
  let credit: CreditTicket;
  try {
    credit = await ctx.reservations.take(principal.orgId, cents);
  } catch (err) {
    await routing.catch(() => undefined);
    throw err;
  }
  let opening: Promise<unknown> | undefined;
  try {
    const decision = await routing;
    if (!('node' in decision)) throw refusalError(decision);
    const node = decision.node;
    const handoff = ctx.jobSignal.reserve(node.id);
    const o: Opening = {
      principal,
      call,
      workId,
      cents,
      decision,
      dispatched: handoff !== undefined,
      instanceId: ctx.reservations.instanceId,
      leaseExpiresAt: new Date(Date.now() + ctx.config.leaseSeconds * 1000),
      openedAt: new Date(),
      eventRows: ctx.config.log.gatewayEventRows,
    };
    const request = openedRequest(o);
    // Handed over at once: the opening follows in the writer. Else the node finds the work in the
    // store at its next poll, so the opening commits first, in a transaction of its own.
    // A handed-over opening waits (SVC_WRITER_OPENING_WAIT_MS) for the request's completion, so
    // that a request answered within it commits its opening and completion in one transaction.
    const waitMs = Math.max(ctx.config.writer.flushMs, ctx.config.writer.openingWaitMs);
    opening = handoff ? enqueueOpening(ctx, o, waitMs) : ctx.db.transaction((tx) => writeOpening(ctx, tx, o));
    opening.catch((err: unknown) => {
      ctx.log.error({ err, request_id: call.id }, 'gateway: the opening of a dispatched request failed to write');
    });
    // Known to this process before the node can answer, so its receipt can be checked in memory.
    // The credit goes back once the request is forgotten here: charged and committed, or ended.
    ctx.hub.attempts.open(request, { opening, credit, ...(handoff ? { hurry: () => ctx.writer.hurry() } : {}) });
    if (handoff) {
      const work = { ...openedWork(o), ticket: ticketOf(ctx, o) };
      if (handoff.deliver([work])) {
        hop('gateway.pushed');
        return { workId, node };
      }
    }
    await opening;
    if (handoff) await undispatchWork(ctx.db, workId);
    await ctx.bus.publish('jobs', `node:${node.id}`);
    return { workId, node };
  } catch (err) {
    if (!opening) credit.release();
    // The work did not reach the node: the request is no longer this process's to complete.
    ctx.hub.attempts.end(call.id);
    throw err;
  }
}

/**
 * Writes work leased to `nodeId` in one transaction (`write` returns it, or undefined to write
 * none), then gets it to the node. A poll of that node waiting in this process is reserved first,
 * so `write` stores the work already `dispatched` and the poll answers with it; otherwise the
 * work waits for the node's next poll. Returns the work written.
 */
async function leaseWork(
  ctx: ServiceContext,
  nodeId: string,
  write: (tx: Queryable, dispatched: boolean) => Promise<WorkRow | undefined>,
  committed?: () => void,
): Promise<WorkRow | undefined> {
  const handoff = ctx.jobSignal.reserve(nodeId);
  let work: WorkRow | undefined;
  try {
    work = await ctx.db.transaction((tx) => write(tx, handoff !== undefined));
  } finally {
    if (!work) handoff?.release();
  }
  if (work) committed?.();
  if (work) await sendWork(ctx, work, handoff);
  return work;
}

/**
 * Gets committed work to its node: handed to the node's poll reserved in this process (the work
 * was written already dispatched), or, when there was none or it hung up meanwhile, left for its
 * next poll with a `node:<id>` message to whichever instance holds that poll.
 */
export async function sendWork(ctx: ServiceContext, work: WorkRow, handoff: Handoff | undefined): Promise<void> {
  if (handoff?.deliver([work])) return;
  if (handoff) await undispatchWork(ctx.db, work.id);
  await ctx.bus.publish('jobs', `node:${work.node_id}`);
}

/** Leases the request to another node (failover); undefined when no other node is eligible. */
export async function redispatch(
  ctx: ServiceContext,
  call: GatewayCall,
  workId: string,
  tried: string[],
  why: string,
): Promise<Attempt | undefined> {
  const decision = await pickNode(ctx, call, tried);
  if (!('node' in decision)) return undefined;
  const node = decision.node;
  // The request must be in the store to be leased again.
  await openingsSettled(ctx.hub.attempts, [call.id]);
  const moved = await leaseWork(
    ctx,
    node.id,
    async (tx, dispatched) => {
      const found = await findGatewayRequest(tx, call.id, true);
      if (!found || found.status !== 'running') return undefined;
      // A failover is appended as rows: the events derived so far become rows first.
      const request = await storeDerivedEvents(tx, found);
      const work = await insertLeasedWork(tx, {
        ...workPayload(call),
        id: workId,
        owner_id: call.id,
        org_id: request.org_id,
        node_id: node.id,
        lease_seconds: ctx.config.leaseSeconds,
        dispatched,
      });
      const attempts = [
        ...(Array.isArray(request.metadata.attempts) ? request.metadata.attempts : []),
        { node_id: node.id, work_id: workId },
      ];
      await setAttempt(tx, call.id, { node_id: node.id, work_id: workId, metadata: { ...request.metadata, attempts } });
      await recordEvents(tx, call.id, [
        {
          type: 'request.failover',
          summary: `retrying once on another node: ${why}`.slice(0, 500),
          metadata: { failed_node_id: tried[tried.length - 1] ?? null, reason: why },
        },
        ...routedEvents(routingFacts(decision), workId, tried.length + 1),
      ]);
      return work;
    },
    () => ctx.hub.attempts.moved(call.id, workId, node.id),
  );
  if (!moved) return undefined;
  return { workId, node };
}

/**
 * The one failover of a request whose first attempt failed before any byte reached the client:
 * closes the old follower, follows a new work item and leases it to another eligible node.
 * Returns the new attempt and its follower (the node joins `tried`), or undefined when no other
 * node may take it (the caller then ends the request).
 */
export async function failOver(
  ctx: ServiceContext,
  call: GatewayCall,
  failed: { attempt: Attempt; follower: WorkFollower; tried: string[]; why: string },
): Promise<{ attempt: Attempt; follower: WorkFollower } | undefined> {
  failed.follower.close();
  const workId = newId('wrk');
  const follower = followWork(ctx, workId);
  const next = await redispatch(ctx, call, workId, failed.tried, failed.why);
  if (!next) {
    follower.close();
    return undefined;
  }
  ctx.log.info(
    { request_id: call.id, failed_node: failed.attempt.node.id, node_id: next.node.id },
    `gateway failover: ${failed.why}`,
  );
  failed.tried.push(next.node.id);
  return { attempt: next, follower };
}

export { failureMessage, mayRetry } from './follow-step.js';

/** A completed request: the node's result bytes, its receipt and the request row (usage, charge). */
export interface Finished {
  attempt: Attempt;
  output: Buffer;
  receiptId: string;
  request: GatewayRequestRow;
}

/** The request's answer: from the completion handed over in memory, else read from the store. */
export async function finishedOf(
  ctx: ServiceContext,
  call: GatewayCall,
  attempt: Attempt,
  completion?: LocalCompletion,
): Promise<Finished> {
  if (completion?.output)
    return { attempt, output: completion.output, receiptId: completion.receiptId, request: completion.request };
  const [blob, request] = await Promise.all([
    readWorkResult(ctx, attempt.workId),
    completion ? completion.request : findGatewayRequest(ctx.db, call.id),
  ]);
  if (!blob || !request?.receipt_id)
    throw new Error(`completed work ${attempt.workId} has no stored result or receipt`);
  return { attempt, output: blob.bytes, receiptId: request.receipt_id, request };
}

/**
 * Where {@link driveRequest} sends what it follows: a JSON answer collects the completion, a
 * stream writes each delta as it comes. One object per request: the loop calls its methods and
 * creates nothing per event.
 */
export interface DriveSink<T> {
  /** Streamed: deltas reach the client as they come (the state `followStep` keeps). */
  readonly stream: boolean;
  /** A byte reached the client: a failure from here on is told in the answer, not thrown. */
  readonly started: boolean;
  /** A `write` action (streamed only): open the answer on `attempt` if need be, then send the delta. */
  write(attempt: Attempt, content: string, toolCalls: ToolCallDeltaWire[] | undefined): void;
  /** The receipt was accepted: the answer. */
  complete(finished: Finished, state: FollowState): T;
  /** An ending not thrown as an HTTP error (`error_chunk`, `finish`, `none`), with what it billed. */
  close(ending: Ending, usage: ModelUsage | undefined, state: FollowState): T;
  /** An internal error after the first byte. */
  fail(error: ApiError): T;
}

/**
 * The drive loop of a gateway request, plain and streamed (DESIGN.md section 10): dispatches it,
 * follows its work, applies {@link followStep}'s actions (the one failover included) and ends it,
 * telling `sink` what to answer. Before the first byte a failure throws (502 `upstream_error`,
 * 504 `timeout`, 503, 402); after it the sink ends the answer. An aborted `signal` cancels the
 * request and its work.
 *
 * @example
 * const done = await driveRequest(ctx, principal, call, answerSink);
 */
export async function driveRequest<T>(
  ctx: ServiceContext,
  principal: Principal,
  call: GatewayCall & { promptEstimate?: number },
  sink: DriveSink<T>,
  signal?: AbortSignal,
): Promise<T> {
  const deadline = Date.now() + ctx.config.gatewayTimeoutMs;
  const workId = newId('wrk');
  const follower = followWork(ctx, workId);
  let attempt: Attempt;
  try {
    attempt = await openRequest(ctx, principal, call, workId);
  } catch (err) {
    follower.close();
    throw err;
  }
  const current: Following = { attempt, follower, tried: [attempt.node.id] };
  let state = initialFollow(sink.stream, attempt.node.id);
  try {
    for (;;) {
      const item = await current.follower.next(deadline, state.clientGone ? undefined : signal);
      for (const event of followEvents(item, ctx.config.gatewayTimeoutMs)) {
        let action: FollowAction;
        [state, action] = await step(ctx, call, state, event, current);
        if (action.type === 'wait') continue;
        if (action.type === 'write') {
          sink.write(current.attempt, action.content, action.tool_calls);
          continue;
        }
        if (action.type === 'complete') {
          const completion = item.kind === 'ended' ? item.completion : undefined;
          const finished = await finishedOf(ctx, call, current.attempt, completion);
          // Charged by another instance (its node's receipt reached it): that charge drew on this
          // instance's reservation, which this process learns before its credit goes back.
          if (!completion) await ctx.reservations.resync(principal.orgId);
          return sink.complete(finished, state);
        }
        if (action.type !== 'end') continue;
        const { ending } = action;
        const usage = billed(call.promptEstimate ?? 0, state, ending);
        await endRequest(ctx, call.id, {
          status: ending.status,
          error: ending.error,
          usage,
          cancelWork: ending.cancelWork,
          // Nothing to earn without usage: a plain request's ending bills none.
          ...(ending.status === 'cancelled' ? { earnTo: current.attempt.node } : {}),
        });
        if (ending.answer === 'error')
          throw new ApiError(
            ending.code,
            ending.status === 'cancelled' ? `request ${call.id} was cancelled: ${ending.error}` : ending.error,
          );
        return sink.close(ending, usage, state);
      }
    }
  } catch (err) {
    if (!sink.started) throw err;
    ctx.log.error({ err, request_id: call.id }, 'gateway stream failed');
    await endRequest(ctx, call.id, {
      status: 'failed',
      error: 'internal error',
      usage: { completion_tokens: estimateTokens(state.delivered) },
    }).catch(() => undefined);
    return sink.fail(new ApiError('internal', 'internal server error'));
  } finally {
    current.follower.close();
    // Forgotten unless a receipt is completing it behind the answer (its write forgets it).
    ctx.hub.attempts.end(call.id);
  }
}

/**
 * What an ending bills, in tokens (DESIGN.md section 10: usage is billed even when the client
 * leaves); `promptEstimate` is a chat's (a plain request's ending bills none).
 */
function billed(promptEstimate: number, state: FollowState, ending: Ending): ModelUsage | undefined {
  const delivered = estimateTokens(state.delivered) + estimateTokens(state.deliveredTools);
  switch (ending.bill) {
    case 'none':
      return undefined;
    case 'delivered':
      return { completion_tokens: delivered };
    case 'prompt_and_delivered':
      return { prompt_tokens: promptEstimate, completion_tokens: delivered };
    case 'node_count':
      return {
        prompt_tokens: state.done?.usage?.prompt_tokens ?? promptEstimate,
        completion_tokens: state.done?.usage?.completion_tokens ?? delivered,
      };
  }
}

/**
 * The JSON answer's sink: the completion is the answer. A plain request's work yields no write,
 * and every ending of it is an HTTP error, thrown before this sink is told.
 */
const answerSink: DriveSink<Finished> = {
  stream: false,
  started: false,
  write() {
    // Never called: followStep writes nothing for a request that is not streamed.
  },
  complete: (finished) => finished,
  close(ending) {
    throw new ApiError(ending.code, ending.error);
  },
  fail(error) {
    throw error;
  },
};

/**
 * Runs a request to its end, not streamed: dispatches it, waits for the node's receipt, and on a
 * node failure or lost lease before any result retries once on another eligible node. Throws
 * 503 `no_capacity` (no node), 402, 502 `upstream_error` (the node failed) or 504 `timeout`
 * (`SVC_GATEWAY_TIMEOUT_MS`, or the node went silent); nothing is charged on a failure.
 * An aborted `signal` cancels the request (and its work) and throws `timeout`.
 *
 * @example
 * const done = await runRequest(ctx, principal, call);
 * JSON.parse(done.output.toString('utf8'));
 */
export function runRequest(
  ctx: ServiceContext,
  principal: Principal,
  call: GatewayCall,
  options: { signal?: AbortSignal } = {},
): Promise<Finished> {
  return driveRequest(ctx, principal, call, answerSink, options.signal);
}

/** The attempt a request follows, its follower, and the nodes tried. */
interface Following {
  attempt: Attempt;
  follower: WorkFollower;
  tried: string[];
}

/**
 * {@link followStep}, with its one IO of its own done: a `failover` action leases the request to
 * another node (updating `current`) and steps on with the outcome, so the caller only ever sees
 * `wait`, `write`, `complete` and `end`.
 */
async function step(
  ctx: ServiceContext,
  call: GatewayCall,
  state: FollowState,
  event: FollowEvent,
  current: Following,
): Promise<[FollowState, FollowAction]> {
  const [next, action] = followStep(state, event);
  if (action.type !== 'failover') return [next, action];
  const moved = await failOver(ctx, call, {
    attempt: current.attempt,
    follower: current.follower,
    tried: current.tried,
    why: action.why,
  });
  if (!moved) return followStep(next, { kind: 'no_failover', state: action.state, why: action.why });
  current.attempt = moved.attempt;
  current.follower = moved.follower;
  return followStep(next, { kind: 'failed_over', nodeId: moved.attempt.node.id });
}

/**
 * Ends requests that an instance left running when it stopped (crash, kill -9): past the gateway
 * timeout by a minute, they are `timeout`, their work cancelled (a hold, when an older request
 * has one, released). Safe on
 * several instances at once (each request is closed once).
 */
export async function sweepStaleRequests(ctx: ServiceContext): Promise<number> {
  const ids = await staleRequests(ctx.db, Math.ceil(ctx.config.gatewayTimeoutMs / 1000) + 60, 100);
  let ended = 0;
  for (const id of ids) {
    const charged = await endRequest(ctx, id, {
      status: 'timeout',
      error: 'abandoned: the instance serving it stopped',
      cancelWork: true,
    });
    if (charged !== undefined) ended++;
  }
  return ended;
}

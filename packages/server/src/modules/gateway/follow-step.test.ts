import { describe, expect, it } from 'vitest';
import {
  followEvents,
  followStep,
  initialFollow,
  type FollowAction,
  type FollowEvent,
  type FollowState,
} from './follow-step.js';
import type { WorkState } from '../work/store.js';

const failed = (error: string, retryable: boolean | null = true): WorkState => ({
  status: 'failed',
  error,
  error_retryable: retryable,
});
const lost: WorkState = { status: 'lost', error: null, error_retryable: null };
const completed: WorkState = { status: 'completed', error: null, error_retryable: null };
const done = { type: 'done' as const, usage: { prompt_tokens: 7, completion_tokens: 3 }, finish_reason: 'stop' };

/** Runs events through the step from a state; returns the last state and every action. */
function run(from: FollowState, events: FollowEvent[]): { state: FollowState; actions: FollowAction[] } {
  let state = from;
  const actions: FollowAction[] = [];
  for (const e of events) {
    let action: FollowAction;
    [state, action] = followStep(state, e);
    actions.push(action);
  }
  return { state, actions };
}

const plain = initialFollow(false, 'node_a');
const streamed = initialFollow(true, 'node_a');

describe('followStep: the follow/failover rules, plain and streamed', () => {
  it.each<[string, FollowState, FollowEvent[], FollowAction]>([
    ['plain: the receipt completes the request', plain, [{ kind: 'ended', state: completed }], { type: 'complete' }],
    ['plain: stream events are ignored', plain, [{ kind: 'delta', content: 'x' }], { type: 'wait' }],
    [
      'plain: a retryable failure before any byte fails over',
      plain,
      [{ kind: 'ended', state: failed('oom') }],
      { type: 'failover', why: 'node node_a failed: oom', state: failed('oom') },
    ],
    [
      'plain: a lost lease fails over',
      plain,
      [{ kind: 'ended', state: lost }],
      { type: 'failover', why: 'node node_a stopped answering (its lease expired before a result)', state: lost },
    ],
    [
      'plain: a final failure is a 502, nothing billed',
      plain,
      [{ kind: 'ended', state: failed('bad model', false) }],
      {
        type: 'end',
        ending: {
          status: 'failed',
          error: 'node node_a failed: bad model',
          code: 'upstream_error',
          bill: 'none',
          cancelWork: false,
          answer: 'error',
        },
      },
    ],
    [
      'plain: the timeout cancels the work and answers 504',
      plain,
      [{ kind: 'timeout', timeoutMs: 1000 }],
      {
        type: 'end',
        ending: {
          status: 'timeout',
          error: 'no result from node node_a within 1000 ms',
          code: 'timeout',
          bill: 'none',
          cancelWork: true,
          answer: 'error',
        },
      },
    ],
    [
      'plain: the caller leaving cancels the request and its work',
      plain,
      [{ kind: 'aborted' }],
      {
        type: 'end',
        ending: {
          status: 'cancelled',
          error: 'the caller stopped waiting',
          code: 'timeout',
          bill: 'none',
          cancelWork: true,
          answer: 'error',
        },
      },
    ],
    [
      'streamed: the first delta opens the stream',
      streamed,
      [{ kind: 'delta', content: 'Hel' }],
      { type: 'write', content: 'Hel' },
    ],
    [
      'streamed: done opens the stream too (an empty answer)',
      streamed,
      [{ kind: 'done', event: done }],
      { type: 'write', content: '' },
    ],
    [
      'streamed: an error event before the first byte waits for the fail call',
      streamed,
      [{ kind: 'node_error', message: 'engine crashed' }],
      { type: 'wait' },
    ],
    [
      'streamed: the fail call after an error event fails over, naming the node error',
      streamed,
      [
        { kind: 'node_error', message: 'engine crashed' },
        { kind: 'ended', state: failed('generic') },
      ],
      { type: 'failover', why: 'node node_a failed: engine crashed', state: failed('generic') },
    ],
    [
      'streamed: an error after the first byte ends the stream with an error chunk, billing what was delivered',
      streamed,
      [
        { kind: 'delta', content: 'Hel' },
        { kind: 'node_error', message: 'gone' },
      ],
      {
        type: 'end',
        ending: {
          status: 'failed',
          error: 'node node_a failed mid-stream: gone',
          code: 'upstream_error',
          bill: 'delivered',
          cancelWork: false,
          answer: 'error_chunk',
        },
      },
    ],
    [
      'streamed: a failure after the first byte is not retried',
      streamed,
      [
        { kind: 'delta', content: 'Hel' },
        { kind: 'ended', state: failed('oom') },
      ],
      {
        type: 'end',
        ending: {
          status: 'failed',
          error: 'node node_a failed: oom',
          code: 'upstream_error',
          bill: 'delivered',
          cancelWork: false,
          answer: 'error_chunk',
        },
      },
    ],
    [
      'streamed: the whole answer out but no receipt: finish, billing the node counts',
      streamed,
      [
        { kind: 'delta', content: 'Hi' },
        { kind: 'done', event: done },
        { kind: 'ended', state: lost },
      ],
      {
        type: 'end',
        ending: {
          status: 'failed',
          error: 'no receipt: node node_a stopped answering (its lease expired before a result)',
          code: 'upstream_error',
          bill: 'node_count',
          cancelWork: false,
          answer: 'finish',
        },
      },
    ],
    [
      'streamed: the timeout after the first byte ends with an error chunk',
      streamed,
      [
        { kind: 'delta', content: 'Hi' },
        { kind: 'timeout', timeoutMs: 5 },
      ],
      {
        type: 'end',
        ending: {
          status: 'timeout',
          error: 'node node_a did not finish within 5 ms',
          code: 'timeout',
          bill: 'delivered',
          cancelWork: true,
          answer: 'error_chunk',
        },
      },
    ],
    [
      'streamed: a client leaving mid-stream cancels the work and bills the prompt and what was generated',
      streamed,
      [{ kind: 'delta', content: 'Hi' }, { kind: 'aborted' }],
      {
        type: 'end',
        ending: {
          status: 'cancelled',
          error: 'the client disconnected',
          code: 'timeout',
          bill: 'prompt_and_delivered',
          cancelWork: true,
          answer: 'none',
        },
      },
    ],
    [
      'streamed: a client leaving after done waits for the receipt',
      streamed,
      [{ kind: 'done', event: done }, { kind: 'aborted' }],
      { type: 'wait' },
    ],
    [
      'streamed: deltas after the client left are counted, not written',
      streamed,
      [{ kind: 'done', event: done }, { kind: 'aborted' }, { kind: 'delta', content: 'more' }],
      { type: 'wait' },
    ],
    [
      'streamed: before the first byte, a client leaving bills nothing',
      streamed,
      [{ kind: 'aborted' }],
      {
        type: 'end',
        ending: {
          status: 'cancelled',
          error: 'the client disconnected',
          code: 'timeout',
          bill: 'none',
          cancelWork: true,
          answer: 'none',
        },
      },
    ],
    [
      'a failover that found no node ends like a final failure (a lost lease is a 504)',
      plain,
      [{ kind: 'no_failover', state: lost, why: 'node node_a stopped answering' }],
      {
        type: 'end',
        ending: {
          status: 'failed',
          error: 'node node_a stopped answering',
          code: 'timeout',
          bill: 'none',
          cancelWork: false,
          answer: 'error',
        },
      },
    ],
    [
      'the second attempt failing is not retried again',
      plain,
      [
        { kind: 'ended', state: failed('oom') },
        { kind: 'failed_over', nodeId: 'node_b' },
        { kind: 'ended', state: failed('oom again') },
      ],
      {
        type: 'end',
        ending: {
          status: 'failed',
          error: 'node node_b failed: oom again',
          code: 'upstream_error',
          bill: 'none',
          cancelWork: false,
          answer: 'error',
        },
      },
    ],
  ])('%s', (_name, from, events, expected) => {
    expect(run(from, events).actions.at(-1)).toEqual(expected);
  });

  it('keeps what the transports need: delivered text, the done event, the attempt and its node', () => {
    const a = run(streamed, [
      { kind: 'delta', content: 'Hel' },
      { kind: 'delta', content: 'lo' },
      { kind: 'done', event: done },
    ]).state;
    expect(a).toMatchObject({ started: true, delivered: 'Hello', done, attempts: 1, nodeId: 'node_a' });
    const b = run(streamed, [
      { kind: 'node_error', message: 'x' },
      { kind: 'failed_over', nodeId: 'node_b' },
    ]).state;
    expect(b).toMatchObject({ attempts: 2, nodeId: 'node_b', nodeError: undefined, started: false });
  });

  it('turns a follower item into step events, stream events in order', () => {
    expect(
      followEvents(
        { kind: 'events', events: [{ type: 'delta', content: 'a' }, done, { type: 'error', message: 'e' }] },
        9,
      ),
    ).toEqual([
      { kind: 'delta', content: 'a' },
      { kind: 'done', event: done },
      { kind: 'node_error', message: 'e' },
    ]);
    expect(followEvents({ kind: 'timeout' }, 9)).toEqual([{ kind: 'timeout', timeoutMs: 9 }]);
    expect(followEvents({ kind: 'ended', state: lost }, 9)).toEqual([{ kind: 'ended', state: lost }]);
  });
});

/**
 * Whether `svc serve` or `svc node` keeps anything per request: one pair (`startSvc`, as
 * `gateway.ts` runs them) answers `--blocks` blocks of `--per` chat requests from 16 loops, and
 * after each block the bench reads each process's heap after a forced collection, through the
 * inspector protocol (`--inspect=127.0.0.1:0` on both processes: `HeapProfiler.collectGarbage`,
 * `Runtime.getHeapUsage`). A heap that still grows by the same amount block after block, once
 * the first blocks warmed the processes up, is a leak; the end lists each process's largest Maps,
 * Sets and Arrays (`Runtime.queryObjects`), where a per-request leak usually shows.
 *
 * `--stream` sends streamed chats; `--abort-every N` makes every Nth client hang up after the
 * first chunk (the paths a hang-up takes: the request's waiters, its follow loop, its records).
 *
 * @example
 * npx tsx bench/heap.ts --blocks 6 --per 2000
 * npx tsx bench/heap.ts --stream --abort-every 4
 * npx tsx bench/heap.ts --checkout /tmp/base   # another checkout's svc
 * DATABASE_URL=postgres://... npx tsx bench/heap.ts
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startOpenAITestServer } from '@svc/node-agent/testing';
import { startInspectedPair } from './inspector.js';
import { inLoops, positiveInt } from './lib.js';
import { postChat, stop, SVC_BIN, type SvcProcess } from './svc.js';

const { values } = parseArgs({
  options: {
    blocks: { type: 'string', default: '5' },
    per: { type: 'string', default: '2000' },
    stream: { type: 'boolean', default: false },
    'abort-every': { type: 'string' },
    checkout: { type: 'string' },
  },
});
const blocks = positiveInt('blocks', values.blocks);
const per = positiveInt('per', values.per);
const abortEvery = values['abort-every'] === undefined ? undefined : positiveInt('abort-every', values['abort-every']);
const bin = values.checkout ? join(values.checkout, 'packages/cli/bin/svc.js') : SVC_BIN;
const LOOPS = 16;

const upstream = await startOpenAITestServer();
const running: SvcProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
let target = { url: '', buyerKey: '' };
let sent = 0;
const chat = async () => {
  const hangUp = abortEvery !== undefined && ++sent % abortEvery === 0;
  const controller = new AbortController();
  const res = await postChat(target, { stream: values.stream, signal: controller.signal });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  if (!hangUp) {
    await res.arrayBuffer();
    return;
  }
  const reader = res.body?.getReader();
  await reader?.read();
  controller.abort();
  await reader?.read().catch(() => undefined);
};

try {
  const { pair, gateway, node } = await startInspectedPair(bin, upstream.url, running, cleanups, async (p) => {
    target = p;
    await chat();
  });
  console.log(
    `${bin}, store ${pair.store.databaseUrl ? 'postgres' : 'pglite'}; ${blocks} blocks of ${per} ${values.stream ? 'streamed ' : ''}chat requests from ${LOOPS} loops` +
      (abortEvery ? `, every ${abortEvery}th client hanging up after the first chunk` : ''),
  );
  const mb = (bytes: number) => (bytes / 1e6).toFixed(2);
  for (let block = 0; block <= blocks; block++) {
    if (block > 0) await inLoops(LOOPS, per, chat);
    // Let the writer's last flush and the node's acknowledgements land first.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const [g, n] = [await gateway.heapAfterGc(), await node.heapAfterGc()];
    console.log(`after ${block * per} requests: svc serve heap ${mb(g)} MB, svc node heap ${mb(n)} MB`);
  }
  for (const [name, session] of [
    ['svc serve', gateway],
    ['svc node', node],
  ] as const) {
    console.log(`${name}'s largest collections:`);
    for (const line of await session.largest()) console.log(`  ${line}`);
    session.close();
  }
} finally {
  for (const p of running.reverse()) await stop(p);
  for (const c of cleanups) await c();
  await upstream.close();
}

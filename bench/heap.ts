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
import WebSocket from 'ws';
import { startOpenAITestServer } from '@svc/node-agent/testing';
import { positiveInt } from './lib.js';
import { startSvc, stop, SVC_BIN, type SvcProcess } from './svc.js';

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

/** An inspector session: heap used after a forced collection, and the largest collections. */
interface Inspected {
  heapAfterGc(): Promise<number>;
  largest(): Promise<string[]>;
  close(): void;
}

async function inspect(target: SvcProcess): Promise<Inspected> {
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(target.output())?.[1];
  if (url === undefined) throw new Error(`no inspector address in the process's output:\n${target.output()}`);
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let id = 0;
  const call = <T>(method: string, params: Record<string, unknown> = {}) =>
    new Promise<T>((resolve, reject) => {
      const mine = ++id;
      const onMessage = (data: WebSocket.RawData) => {
        const m = JSON.parse(data.toString()) as { id?: number; result?: T; error?: { message: string } };
        if (m.id !== mine) return;
        ws.off('message', onMessage);
        if (m.error) reject(new Error(`${method}: ${m.error.message}`));
        else resolve(m.result as T);
      };
      ws.on('message', onMessage);
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  // Sizes and first keys of every instance of a built-in collection with more than 200 entries
  // (sizes first: the heap holds many thousands of small arrays).
  const describe = `function () {
    // A subclass's prototype (Node's SafeMap.prototype, say) is among them, and its size throws.
    const size = (c) => { try { return c.size ?? c.length; } catch { return 0; } };
    const name = (k) => (k !== null && typeof k === 'object' ? (k.constructor?.name ?? 'object') : String(k).slice(0, 40));
    return this.filter((c) => size(c) > 200)
      .sort((a, b) => size(b) - size(a))
      .slice(0, 6)
      .map((c) => [size(c), (c.size !== undefined ? [...c.keys()] : c).slice(0, 3).map(name).join(' | ')]);
  }`;
  return {
    async heapAfterGc() {
      await call('HeapProfiler.collectGarbage');
      await call('HeapProfiler.collectGarbage');
      return (await call<{ usedSize: number }>('Runtime.getHeapUsage')).usedSize;
    },
    async largest() {
      const lines: string[] = [];
      for (const ctor of ['Map', 'Set', 'Array']) {
        const proto = await call<{ result: { objectId: string } }>('Runtime.evaluate', {
          expression: `${ctor}.prototype`,
          includeCommandLineAPI: true,
        });
        const found = await call<{ objects: { objectId: string } }>('Runtime.queryObjects', {
          prototypeObjectId: proto.result.objectId,
        });
        const r = await call<{ result: { value: [number, string][] }; exceptionDetails?: { text: string } }>(
          'Runtime.callFunctionOn',
          { objectId: found.objects.objectId, functionDeclaration: describe, returnByValue: true },
        );
        if (r.exceptionDetails) throw new Error(`listing ${ctor}s failed: ${r.exceptionDetails.text}`);
        for (const [size, first] of r.result.value) lines.push(`${ctor} of ${size}: ${first}`);
      }
      return lines;
    },
    close: () => ws.close(),
  };
}

const upstream = await startOpenAITestServer();
const running: SvcProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
let base = '';
let key = '';
let sent = 0;
const chat = async () => {
  const hangUp = abortEvery !== undefined && ++sent % abortEvery === 0;
  const controller = new AbortController();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    signal: controller.signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'the quick brown fox jumps over the lazy dog' }],
      max_tokens: 16,
      stream: values.stream,
    }),
  });
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
  const pair = await startSvc(
    bin,
    upstream.url,
    running,
    cleanups,
    async (p) => {
      base = p.url;
      key = p.buyerKey;
      await chat();
    },
    { nodeFlags: ['--inspect=127.0.0.1:0'] },
  );
  const gateway = await inspect(pair.server);
  const node = await inspect(pair.agent);
  console.log(
    `${bin}, store ${pair.store.databaseUrl ? 'postgres' : 'pglite'}; ${blocks} blocks of ${per} ${values.stream ? 'streamed ' : ''}chat requests from ${LOOPS} loops` +
      (abortEvery ? `, every ${abortEvery}th client hanging up after the first chunk` : ''),
  );
  const mb = (bytes: number) => (bytes / 1e6).toFixed(2);
  for (let block = 0; block <= blocks; block++) {
    if (block > 0) {
      let left = per;
      await Promise.all(
        Array.from({ length: LOOPS }, async () => {
          while (left-- > 0) await chat();
        }),
      );
    }
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

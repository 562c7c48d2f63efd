/**
 * Where `svc serve` and `svc node` allocate per request: one pair (`startSvc`, as `gateway.ts`
 * runs them) answers `--warmup` chat requests from 16 loops, then V8's sampling heap profiler
 * (`HeapProfiler.startSampling` through the inspector, objects later collected by minor and major
 * collections included) runs in both processes over `--requests` more. Prints, per process, the
 * bytes allocated per request (an estimate from samples every `--interval` bytes), by source
 * file and by allocation site (the function and its two callers). What a request allocates is
 * what the young generation's collections (and V8's helper threads) work through.
 *
 * @example
 * npx tsx bench/alloc.ts
 * npx tsx bench/alloc.ts --warmup 4000 --requests 4000 --stream
 * npx tsx bench/alloc.ts --checkout /tmp/base   # another checkout's svc
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startOpenAITestServer } from '@svc/node-agent/testing';
import { startInspectedPair } from './inspector.js';
import { inLoops, positiveInt, wholeNumber } from './lib.js';
import { postChat, stop, SVC_BIN, type SvcProcess } from './svc.js';

const { values } = parseArgs({
  options: {
    warmup: { type: 'string', default: '2000' },
    requests: { type: 'string', default: '2000' },
    interval: { type: 'string', default: '4096' },
    top: { type: 'string', default: '20' },
    stream: { type: 'boolean', default: false },
    checkout: { type: 'string' },
  },
});
const warmup = wholeNumber('warmup', values.warmup);
const requests = positiveInt('requests', values.requests);
const interval = positiveInt('interval', values.interval);
const top = positiveInt('top', values.top);
const bin = values.checkout ? join(values.checkout, 'packages/cli/bin/svc.js') : SVC_BIN;
const LOOPS = 16;

/** A node of the sampling heap profile (`HeapProfiler.SamplingHeapProfileNode`). */
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/** A script's URL as read here: the checkout's files relative to it, a package by its name. */
function shortUrl(url: string): string {
  if (url === '') return '(native or V8)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return pkg[1] as string;
  return url.replace(/^file:\/\/.*?\/(packages|bench)\//, '$1/');
}

/** Bytes allocated by source file and by site (function < caller < caller), summed over the profile. */
function tally(head: ProfileNode): { total: number; files: Map<string, number>; sites: Map<string, number> } {
  const files = new Map<string, number>();
  const sites = new Map<string, number>();
  let total = 0;
  const walk = (node: ProfileNode, callers: string[]) => {
    const { functionName, url } = node.callFrame;
    const here = `${functionName || '(anonymous)'} ${shortUrl(url)}`;
    if (node.selfSize > 0) {
      total += node.selfSize;
      files.set(shortUrl(url), (files.get(shortUrl(url)) ?? 0) + node.selfSize);
      const site = [here, ...callers.slice(0, 2)].join(' < ');
      sites.set(site, (sites.get(site) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, [here, ...callers]);
  };
  walk(head, []);
  return { total, files, sites };
}

const upstream = await startOpenAITestServer();
const running: SvcProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
let target = { url: '', buyerKey: '' };
const chat = async () => {
  const res = await postChat(target, { stream: values.stream });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
};

try {
  const { pair, gateway, node } = await startInspectedPair(bin, upstream.url, running, cleanups, async (p) => {
    target = p;
    await chat();
  });
  const sessions = [
    ['svc serve', gateway],
    ['svc node', node],
  ] as const;
  console.log(
    `${bin}, store ${pair.store.databaseUrl ? 'postgres' : 'pglite'}; ${warmup} warm-up then ${requests} sampled ${values.stream ? 'streamed ' : ''}chat requests from ${LOOPS} loops, a sample every ${interval} bytes`,
  );
  await inLoops(LOOPS, warmup, chat);
  // The writer's last flush and the node's acknowledgements of the warm-up land outside the samples.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (const [, session] of sessions)
    await session.call('HeapProfiler.startSampling', {
      samplingInterval: interval,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  await inLoops(LOOPS, requests, chat);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const kb = (bytes: number) => (bytes / requests / 1024).toFixed(1).padStart(7);
  for (const [name, session] of sessions) {
    const { profile } = await session.call<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
    const { total, files, sites } = tally(profile.head);
    console.log(`\n${name}: ${kb(total).trim()} KB allocated per request`);
    console.log('     KB  by file');
    for (const [file, bytes] of [...files].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`${kb(bytes)}  ${file}`);
    console.log('     KB  by site (function < caller < caller)');
    for (const [site, bytes] of [...sites].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`${kb(bytes)}  ${site}`);
    session.close();
  }
} finally {
  for (const p of running.reverse()) await stop(p);
  for (const c of cleanups) await c();
  await upstream.close();
}

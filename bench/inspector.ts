// The inspector protocol over a WebSocket, for the benches that read a running svc process's heap
// (heap.ts: the heap after a forced collection; alloc.ts: where it allocates).
import WebSocket from 'ws';
import { startSvc, type SvcPair, type SvcProcess } from './svc.js';

/** An inspector session with one process: any protocol method, and the two heap.ts reads. */
export interface Inspected {
  /** Calls an inspector protocol method and resolves with its result. */
  call<T>(method: string, params?: Record<string, unknown>): Promise<T>;
  /** Heap used after two forced collections, in bytes. */
  heapAfterGc(): Promise<number>;
  /** The largest Maps, Sets and Arrays of the heap, with their sizes and first keys. */
  largest(): Promise<string[]>;
  close(): void;
}

/**
 * Connects to the inspector of a process started with `--inspect=127.0.0.1:0` (its address is
 * read from what it printed).
 *
 * @example
 * const session = await inspect(pair.server);
 * console.log(await session.heapAfterGc());
 */
export async function inspect(target: SvcProcess): Promise<Inspected> {
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
    call,
  };
}

/**
 * `startSvc` with the inspector open in both processes (`--inspect=127.0.0.1:0`), and a session
 * with each. `ready` is handed the pair's address and the buyer's key once it answers.
 *
 * @example
 * const { pair, gateway, node } = await startInspectedPair(SVC_BIN, upstream.url, running, cleanups, setUp);
 */
export async function startInspectedPair(
  bin: string,
  upstreamUrl: string,
  running: SvcProcess[],
  cleanups: (() => Promise<void>)[],
  ready: (pair: SvcPair) => Promise<void>,
): Promise<{ pair: SvcPair; gateway: Inspected; node: Inspected }> {
  const pair = await startSvc(bin, upstreamUrl, running, cleanups, ready, { nodeFlags: ['--inspect=127.0.0.1:0'] });
  return { pair, gateway: await inspect(pair.server), node: await inspect(pair.agent) };
}

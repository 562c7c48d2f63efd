import { MessageChannel, type MessagePort, type Worker } from 'node:worker_threads';

/** What a store's thread is asked (pglite-worker.mjs); `tx` names an open transaction. */
export type StoreRequest =
  | { op: 'query'; sql: string; params: (string | Uint8Array | null)[]; tx: number | undefined }
  | { op: 'exec'; sql: string; tx: number | undefined }
  | { op: 'begin' }
  | { op: 'end'; tx: number; commit: boolean }
  | { op: 'close' };

/** How the thread opens a store. */
export interface StoreOptions {
  /**
   * PostgreSQL's `shared_buffers`, in MB (PGlite's default, 128, when unset). PGlite zeroes them
   * in WebAssembly memory at every open: about 0.5 s of CPU at 128 MB, which the test suite's
   * hundreds of opens feel and a long-running server does not.
   */
  buffersMb?: number | undefined;
}

/** An error as it crosses from the thread: its message, stack and every field a clone can carry. */
interface WireError {
  message: string;
  stack: string | undefined;
  fields: Record<string, unknown>;
}

type StoreMessage =
  | { id: number; value: unknown; error?: undefined }
  | { id: number; error: WireError }
  | { notify: string; payload: string }
  | { ready: true }
  | { ready: false; error: WireError };

interface Pending {
  resolve(value: { value?: unknown; error?: WireError }): void;
  reject(err: Error): void;
}

/**
 * The server's side of one store open in a thread: numbered requests on a port of its own,
 * answered in any order, and the notifications the thread posts, heard in the order they were
 * posted (before the answer of the statement that raised them). The port keeps the process alive
 * only while a request waits for its answer, as PGlite in the server's own thread never kept it
 * alive. When the thread stops, every request waiting and every later one fails.
 */
export class StoreChannel {
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  /** Why requests fail from now on: the store was closed, or its thread stopped. */
  private stopped: Error | undefined;
  private failure: Error | undefined;
  private readonly onError = (err: Error) => (this.failure = err);
  private readonly onExit = (code: number) => {
    const why = this.failure ? `: ${this.failure.message}` : ` with code ${code}`;
    this.stop(new Error(`the store's thread stopped${why}`, { cause: this.failure }));
  };

  private constructor(
    private readonly thread: Worker,
    private readonly port: MessagePort,
    onNotify: (channel: string, payload: string) => void,
  ) {
    port.on('message', (m: StoreMessage) => {
      if ('notify' in m) onNotify(m.notify, m.payload);
      else if ('id' in m) this.settle(m);
    });
    port.unref();
    thread.on('error', this.onError);
    thread.on('exit', this.onExit);
  }

  /**
   * Opens the store in `dir` in `thread`; rejects with the thread's error when it could not open
   * it, or when the thread stopped first.
   */
  static open(
    thread: Worker,
    dir: string,
    onNotify: (channel: string, payload: string) => void,
    options: StoreOptions = {},
  ): Promise<StoreChannel> {
    const { port1, port2 } = new MessageChannel();
    return new Promise((resolve, reject) => {
      const ready = (m: StoreMessage) => {
        if (!('ready' in m)) return;
        stopListening();
        if (m.ready) resolve(new StoreChannel(thread, port1, onNotify));
        else {
          port1.close();
          reject(errorOf(m.error));
        }
      };
      const error = (err: Error) => {
        stopListening();
        port1.close();
        reject(err);
      };
      const exit = (code: number) => error(new Error(`the store's thread stopped with code ${code}`));
      const stopListening = () => {
        port1.off('message', ready);
        thread.off('error', error);
        thread.off('exit', exit);
      };
      port1.on('message', ready);
      thread.on('error', error);
      thread.on('exit', exit);
      thread.postMessage({ dir, port: port2, buffersMb: options.buffersMb }, [port2]);
    });
  }

  /** Sends `request` and waits for its answer; the thread's errors are rethrown here, with this stack. */
  async request<T>(request: StoreRequest): Promise<T> {
    if (this.stopped) throw this.stopped;
    const id = this.next++;
    const answer = new Promise<{ value?: unknown; error?: WireError }>((resolve, reject) =>
      this.pending.set(id, { resolve, reject }),
    );
    if (this.pending.size === 1) this.port.ref();
    this.port.postMessage({ ...request, id });
    const reply = await answer;
    // Made here rather than in the message handler, so that its stack names the caller.
    if (reply.error) throw errorOf(reply.error);
    return reply.value as T;
  }

  /**
   * Closes the store in its thread, once the requests sent before have been answered. Resolves to
   * whether the thread is free for another store (false when it had stopped already).
   */
  async close(): Promise<boolean> {
    if (this.stopped) return false;
    await this.request({ op: 'close' });
    this.stop(new Error('the store is closed'));
    return true;
  }

  private settle(m: { id: number; value?: unknown; error?: WireError }): void {
    const waiting = this.pending.get(m.id);
    if (!waiting) return;
    this.pending.delete(m.id);
    if (this.pending.size === 0) this.port.unref();
    waiting.resolve(m);
  }

  private stop(why: Error): void {
    this.stopped ??= why;
    this.thread.off('error', this.onError);
    this.thread.off('exit', this.onExit);
    this.port.close();
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const w of waiting) w.reject(this.stopped);
  }
}

/**
 * The thread's error as an `Error` of this thread with the same message and fields (`code`,
 * `constraint`, `detail`... of a PostgreSQL error, whose `name` is `error`). An error that did not
 * come from PostgreSQL keeps the thread's stack after this one.
 */
function errorOf(wire: WireError): Error {
  const err = Object.assign(new Error(wire.message), wire.fields);
  Error.captureStackTrace(err, errorOf);
  if (wire.fields.severity === undefined && wire.stack) {
    const frames = wire.stack.split('\n').filter((line) => line.startsWith('    at '));
    err.stack = `${err.stack ?? ''}\n    in the store's thread:\n${frames.join('\n')}`;
  }
  return err;
}

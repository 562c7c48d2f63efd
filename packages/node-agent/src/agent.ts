import { backoffDelay, sleep, type BackoffPolicy, type Sooner } from './backoff.js';
import { attestWithTsm, tsmAvailable } from './attestation.js';
import { channelClient, createNodeChannel, type NodeChannel } from './channel.js';
import { ControlPlaneError, createNodeClient, type NodeClient } from './client.js';
import { withRetries } from './delivery.js';
import { createHeartbeat } from './heartbeat.js';
import { loadOrCreateIdentity, writeNodeRecord, type NodeIdentity } from './identity.js';
import { createOutbox } from './outbox.js';
import type { EngineSet } from './runners/types.js';
import { removeLeftoverContainers, type OciConfig } from './runners/oci-runner.js';
import { findModel, type ChatFieldsWire } from '@svc/protocol';
import { readSystemInfo } from './system-info.js';
import type { RegisterInfo, RegisterResponse, WorkItem } from './wire.js';
import { deliverWork, processWork, reportFailure, type AgentEvent, type TrackedWork, type WorkDeps } from './work.js';

/** The agent's clocks; tests shorten them. */
export interface AgentTiming {
  /** Long-poll `wait_ms` (default 25 s). */
  waitMs: number;
  /** Heartbeat period (default 10 s). */
  heartbeatMs: number;
  /** Heartbeat period while streamed work runs, so a cancel reaches it quickly (default 2 s). */
  streamHeartbeatMs: number;
  /** How long `stop()` lets running work finish (default 30 s). */
  graceMs: number;
  /** Backoff between failed polls (default 1 s doubling to 30 s, full jitter). */
  pollBackoff: BackoffPolicy;
  /** Backoff between failed uploads (default 0.5 s doubling to 30 s, full jitter). */
  uploadBackoff: BackoffPolicy;
  /** Give up an upload (keeping it in the outbox) after this long (default 2 min). */
  uploadDeadlineMs: number;
}

export const DEFAULT_TIMING: AgentTiming = {
  waitMs: 25_000,
  heartbeatMs: 10_000,
  streamHeartbeatMs: 2_000,
  graceMs: 30_000,
  pollBackoff: { baseMs: 1_000, capMs: 30_000 },
  uploadBackoff: { baseMs: 500, capMs: 30_000 },
  uploadDeadlineMs: 120_000,
};

export interface NodeAgentOptions {
  server: string;
  /** Operator-scoped API key, used only to register. */
  apiKey: string;
  dataDir: string;
  /** Engines by catalogue id; their keys are the models the node registers. */
  engines?: EngineSet;
  /** ISO 3166-1 alpha-2, upper case. */
  country?: string;
  region?: string;
  name?: string;
  /** Work items run at once, 1 to 16 (default 1): a slot frees once the item's receipt is sealed in the outbox. */
  concurrency?: number;
  /**
   * The most signed receipts waiting for the server's acknowledgement (sealed in the outbox, being
   * delivered): the agent asks for work (a pull's `max`, a grant's slots) only while those, plus
   * the work it runs, holds or was granted, stay within it (default 16 x `concurrency`: 4 x held back
   * a fifth of the requests under 16 loops on a loaded PostgreSQL, where acks lag by a few hundred ms).
   */
  maxUnacked?: number;
  allowProcessRunner?: boolean;
  /**
   * The `oci` runner (podman) with the images the operator loaded (`svc node --image`): buyer code
   * (kinds 5-7) runs in containers labelled with the node id; leftovers are removed at start.
   */
  oci?: Omit<OciConfig, 'nodeLabel'>;
  /** Runs repository work (kind 9) with this program (`svc node --capsule CMD`). */
  capsule?: { program: string; args: string[]; env?: Record<string, string> };
  /** Runs kinds 8 and 10 on capture sets with these programs (`svc node --runner 8=CMD`). */
  captureRunners?: ReadonlyMap<number, { program: string; args: string[] }>;
  /** Overrides the detected GPU model (only NVIDIA GPUs are detected). */
  gpuModel?: string;
  /** For control-plane calls (default global fetch). */
  fetch?: typeof fetch;
  /** Use the node channel when the server offers it (default true); false keeps to the HTTP long-poll. */
  channel?: boolean;
  onEvent?: (event: AgentEvent) => void;
  timing?: Partial<AgentTiming>;
  /**
   * Confidential VMs (docs/attestation.md): when configfs-tsm is present under `root` (default
   * /sys/kernel/config/tsm/report), attest after registering and again every `reattestMs`
   * (default 12 h, half the server's default SVC_TEE_REATTEST_HOURS).
   */
  tee?: { root?: string; vcekFile?: string; tdxCollateralDir?: string; reattestMs?: number };
}

export interface NodeAgent {
  /** Registers (retrying transient failures for up to the upload deadline) and starts working. */
  start(): Promise<RegisterResponse>;
  /** Stops polling, lets running work finish within the grace period, then aborts the rest. */
  stop(options?: { graceMs?: number }): Promise<void>;
  readonly nodeId: string | undefined;
  readonly publicKeyHex: string | undefined;
}

/**
 * What the node's engines honour of a chat request beyond the plain fields, per chat model (its
 * registration's `chat_fields`: routing prefers nodes honouring a request's fields); undefined
 * when none honours any.
 *
 * @example
 * declaredChatFields(new Map([['tinyllama', llamaCppEngine]])); // { tinyllama: ['response_format', 'stop', ...] }
 */
export function declaredChatFields(engines: EngineSet): ChatFieldsWire | undefined {
  let declared: ChatFieldsWire | undefined;
  for (const [model, engine] of engines) {
    const fields = findModel(model)?.type === 'chat' ? (engine.chatFields?.(model) ?? []) : [];
    if (fields.length > 0) (declared ??= {})[model] = [...fields];
  }
  return declared;
}

/**
 * What a node with the `oci` runner declares: `runner:oci`, `image:<ref>` for each image it holds
 * (matching sends a job naming an image only to a node holding it) and `oci-gpu` when podman has a
 * CDI spec for NVIDIA GPUs (NodeSummary `managed_oci_gpu_ready`), and `network:egress` when the
 * operator grants jobs a network (`--allow-job-network`: only jobs asking `network: "egress"` get one).
 *
 * @example
 * ociCapabilities({ images: ['localhost/busybox:1'], probe: { gpu: false } }); // ['runner:oci', 'image:localhost/busybox:1']
 */
export function ociCapabilities(oci: {
  images: readonly string[];
  probe: { gpu: boolean };
  allowNetwork?: boolean;
}): string[] {
  return [
    'runner:oci',
    ...oci.images.slice(0, 32).map((ref) => `image:${ref.toLowerCase()}`),
    ...(oci.probe.gpu ? ['oci-gpu'] : []),
    ...(oci.allowNetwork === true ? ['network:egress'] : []),
  ];
}

/**
 * The provider node agent (docs/node-protocol.md, "The agent's duties"): registers, re-delivers
 * the outbox, long-polls for work, runs up to `concurrency` items at once, heartbeats every
 * 10 s (every 2 s while a stream runs, and at once when a job starts), stops work the heartbeat
 * answer or a stream's events answer cancels, and signs and delivers each result through the
 * outbox.
 *
 * @example
 * const agent = createNodeAgent({ server, apiKey, dataDir: './.svc-node', engines, country: 'CA' });
 * const { node_id } = await agent.start();
 * process.once('SIGTERM', () => void agent.stop());
 */
export function createNodeAgent(options: NodeAgentOptions): NodeAgent {
  const timing: AgentTiming = { ...DEFAULT_TIMING, ...options.timing };
  const engines: EngineSet = options.engines ?? new Map();
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 16)
    throw new RangeError('concurrency must be an integer from 1 to 16');
  const maxUnacked = options.maxUnacked ?? 16 * concurrency;
  if (!Number.isInteger(maxUnacked) || maxUnacked < 1) throw new RangeError('maxUnacked must be a positive integer');
  const emit = (event: AgentEvent) => options.onEvent?.(event);
  const models = [...engines.keys()].sort();
  const chatFields = declaredChatFields(engines);
  const outbox = createOutbox(options.dataDir);
  const tracked = new Map<string, TrackedWork>();
  const queue: WorkItem[] = [];
  const tasks = new Set<Promise<void>>();
  const stopController = new AbortController();
  let client: NodeClient | undefined;
  let channel: NodeChannel | undefined;
  let identity: NodeIdentity | undefined;
  let deps: WorkDeps | undefined;
  let loop: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  let heartbeatTimer: NodeJS.Timeout | undefined;
  let attestTimer: NodeJS.Timeout | undefined;
  let streamHeartbeatTimer: NodeJS.Timeout | undefined;
  let wakeLoop: (() => void) | undefined;

  const runningCount = () => [...tracked.values()].filter((w) => w.phase === 'running').length;
  // Sealed (in the outbox) and not yet acknowledged: their slots are free, the outbox holds them.
  const unackedCount = () => tracked.size - runningCount();
  const isStopping = () => stopController.signal.aborted;

  function wake(): void {
    while (!isStopping() && deps !== undefined && queue.length > 0 && runningCount() < concurrency) {
      const item = queue.shift();
      if (item) launch(item, deps);
    }
    wakeLoop?.();
    wakeLoop = undefined;
  }

  function track(work: TrackedWork, task: Promise<void>): void {
    tracked.set(work.work_id, work);
    const done = task
      .catch((err: unknown) =>
        emit({
          event: 'warning',
          work_id: work.work_id,
          message: `internal error: ${err instanceof Error ? err.message : String(err)}`,
        }),
      )
      .finally(() => {
        tracked.delete(work.work_id);
        tasks.delete(done);
        wake();
      });
    tasks.add(done);
  }

  function launch(item: WorkItem, workDeps: WorkDeps): void {
    const work: TrackedWork = {
      work_id: item.work_id,
      job_id: item.job_id,
      item,
      controller: new AbortController(),
      phase: 'running',
    };
    tracked.set(item.work_id, work);
    track(work, processWork(work, workDeps));
    // A job's first heartbeat marks it running; gateway work's lease has just started.
    if (item.type === 'job') void heartbeat.beat();
  }

  const heartbeat = createHeartbeat(
    () => {
      if (client?.nodeId === undefined) return undefined;
      return {
        client,
        body: {
          load: Math.min(1, runningCount() / concurrency),
          active_work: [...tracked.keys(), ...queue.map((i) => i.work_id)],
          models,
        },
      };
    },
    cancel,
    emit,
  );

  function cancel(workId: string): void {
    const queued = queue.findIndex((item) => item.work_id === workId);
    if (queued !== -1) {
      const [item] = queue.splice(queued, 1);
      if (item)
        emit({ event: 'work', work_id: item.work_id, job_id: item.job_id, type: item.type, outcome: 'cancelled' });
      return;
    }
    const work = tracked.get(workId);
    if (work === undefined || work.controller.signal.aborted) return;
    work.reason = 'cancelled';
    work.controller.abort(new Error('cancelled by the control plane'));
  }

  async function register(nodeClient: NodeClient): Promise<RegisterResponse> {
    const system = await readSystemInfo();
    const gpu = options.gpuModel ?? system.gpu_model;
    const info: RegisterInfo = {
      device_type: gpu === undefined ? 'cpu' : 'gpu',
      ...(gpu === undefined ? {} : { gpu_model: gpu }),
      cpu_cores: system.cpu_cores,
      ram_bytes: system.ram_bytes,
      ...(options.country === undefined ? {} : { country: options.country }),
      ...(options.region === undefined ? {} : { region: options.region }),
      models,
      ...(chatFields === undefined ? {} : { chat_fields: chatFields }),
      capabilities: [
        'cpu',
        ...(gpu === undefined ? [] : ['gpu']),
        ...(options.allowProcessRunner ? ['process'] : []),
        ...(options.oci ? ociCapabilities(options.oci) : []),
        ...(options.capsule ? ['capsule'] : []),
        ...[...(options.captureRunners?.keys() ?? [])].map((kind) => `runner:${kind}`),
      ],
      max_concurrency: concurrency,
      ...(options.name === undefined ? {} : { name: options.name }),
    };
    const signal = stopController.signal;
    const r = await withRetries(() => nodeClient.register(info, { signal }), {
      backoff: timing.uploadBackoff,
      deadlineMs: timing.uploadDeadlineMs,
      signal,
    });
    if (!r.ok) throw r.error;
    await writeNodeRecord(options.dataDir, { node_id: r.value.node_id, server: options.server });
    if (deps === undefined) deps = workDeps(nodeClient, gpu);
    return r.value;
  }

  function workDeps(nodeClient: NodeClient, gpu: string | undefined): WorkDeps {
    if (identity === undefined) throw new Error('no identity');
    return {
      client: nodeClient,
      identity,
      outbox,
      run: {
        engines,
        dataDir: options.dataDir,
        allowProcessRunner: options.allowProcessRunner === true,
        ...(options.oci && nodeClient.nodeId ? { oci: { ...options.oci, nodeLabel: nodeClient.nodeId } } : {}),
        trustedOrigin: new URL(options.server).origin,
        ...(options.capsule ? { capsule: options.capsule } : {}),
        ...(options.captureRunners ? { captureRunners: options.captureRunners } : {}),
        signedRequest: nodeClient.signedRequest,
      },
      metadata: {
        ...(gpu === undefined ? {} : { gpu_model: gpu }),
        ...(options.country ? { country: options.country } : {}),
        ...(options.region ? { region: options.region } : {}),
      },
      backoff: timing.uploadBackoff,
      sooner: whenChannelReopens,
      deliveryDeadlineMs: timing.uploadDeadlineMs,
      emit,
      isStopping,
      onRunFinished: () => wake(),
    };
  }

  /** Uploads waiting out a backoff before their next attempt: woken when the channel reopens. */
  const uploadsWaiting = new Set<() => void>();
  const whenChannelReopens: Sooner = (wake) => {
    uploadsWaiting.add(wake);
    return () => uploadsWaiting.delete(wake);
  };

  async function flushOutbox(workDeps: WorkDeps): Promise<void> {
    const { entries, invalid } = await outbox.list();
    for (const name of invalid) {
      await outbox.reject(name);
      emit({ event: 'warning', message: `outbox/${name} is not a valid outbox entry; moved to outbox/rejected/` });
    }
    for (const entry of entries) {
      if (tracked.has(entry.work_id)) continue;
      const work: TrackedWork = {
        work_id: entry.work_id,
        job_id: entry.job_id,
        controller: new AbortController(),
        phase: 'delivering',
      };
      track(work, deliverWork(work, entry, workDeps));
    }
    await Promise.allSettled([...tasks]);
  }

  /** Work handed to the node (a poll's answer, or pushed on granted slots): queued and started. */
  function accept({ items, rejected }: { items: WorkItem[]; rejected: unknown[] }): void {
    for (const bad of rejected)
      emit({ event: 'warning', message: `ignored a malformed work item: ${JSON.stringify(bad).slice(0, 200)}` });
    const fresh = items.filter((item) => !tracked.has(item.work_id) && !queue.some((q) => q.work_id === item.work_id));
    if (isStopping()) {
      // Pushed on a slot granted before the stop: given back at once, for another node.
      for (const item of fresh) {
        if (deps) void reportFailure(deps, item.work_id, 'the node is shutting down', true);
        emit({ event: 'work', work_id: item.work_id, job_id: item.job_id, type: item.type, outcome: 'interrupted' });
      }
      return;
    }
    queue.push(...fresh);
    wake();
  }

  async function pollLoop(nodeClient: NodeClient, workDeps: WorkDeps): Promise<void> {
    await flushOutbox(workDeps);
    let failures = 0;
    let reregister = false;
    while (!isStopping()) {
      const standing = channel?.grants === true;
      // Free slots, less what is already granted, and never so many that the receipts waiting for
      // their ack (with those the work asked for may add) pass maxUnacked.
      const granted = standing ? (channel?.granted ?? 0) : 0;
      const ahead = runningCount() + queue.length + granted;
      const room = Math.min(concurrency - ahead, maxUnacked - unackedCount() - ahead);
      if (standing || room <= 0 || queue.length > 0) {
        // Standing slots: keep the server's count of this node's free slots current; work is
        // pushed on them (`onWork`) and each freed slot is granted again.
        if (standing && room > 0) channel?.grant(room);
        await new Promise<void>((resolve) => (wakeLoop = resolve));
        continue;
      }

      try {
        if (reregister) await register(nodeClient);
        reregister = false;
        const max = room;
        const { items, rejected } = await nodeClient.pollWork(
          { waitMs: timing.waitMs, max },
          { signal: stopController.signal },
        );
        failures = 0;
        accept({ items, rejected });
      } catch (err) {
        if (isStopping()) break;
        // 401 is an unknown node (the server forgot it) or a clock problem; registering again is idempotent.
        if (err instanceof ControlPlaneError && err.status === 401) reregister = true;
        const delay = backoffDelay(failures++, timing.pollBackoff);
        emit({
          event: 'warning',
          message: `polling for work failed (${err instanceof Error ? err.message : String(err)}); retrying in ${delay} ms`,
        });
        await sleep(delay, stopController.signal).catch(() => undefined);
      }
    }
  }

  async function shutdown(graceMs: number): Promise<void> {
    stopController.abort(new Error('the agent is stopping'));
    wake();
    for (const item of queue.splice(0)) {
      if (deps) await reportFailure(deps, item.work_id, 'the node shut down before starting the work', true);
      emit({ event: 'work', work_id: item.work_id, job_id: item.job_id, type: item.type, outcome: 'interrupted' });
    }
    const drained = (async () => {
      await loop;
      while (tasks.size > 0) await Promise.allSettled([...tasks]);
      return false;
    })();
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs)));
    if (await Promise.race([drained, graceOver])) {
      for (const work of tracked.values()) {
        work.reason ??= 'shutdown';
        work.controller.abort(new Error('the agent stopped before the work finished'));
      }
    }
    clearTimeout(timer);
    await drained;
    clearInterval(heartbeatTimer);
    clearInterval(attestTimer);
    clearInterval(streamHeartbeatTimer);
    await heartbeat.idle();
    await channel?.close();
  }

  /**
   * Opens the node channel the server offered and routes the protocol calls through it while it
   * is open. Each reconnection sends the outbox again: receipts not yet acknowledged.
   */
  async function openChannel(
    nodeClient: NodeClient,
    path: string,
    workDeps: WorkDeps,
  ): Promise<{ client: NodeClient; deps: WorkDeps }> {
    if (identity === undefined) throw new Error('no identity');
    const opened = createNodeChannel({
      server: options.server,
      path,
      identity,
      nodeId: () => nodeClient.nodeId,
      onWarning: (message) => emit({ event: 'warning', message }),
      onWork: (work) => accept(work),
      // Hello (grants known) or closed (grants gone): the loop grants again, or polls over HTTP.
      onChange: () => wake(),
      onOpen: (before) => {
        if (before > 0 && !isStopping()) {
          // Work still running: the server ends a dropped channel's gateway leases within seconds
          // (SVC_CHANNEL_LOSS_GRACE_MS, 2 s) unless a heartbeat renews them, so send one now.
          if (tracked.size > 0) void heartbeat.beat();
          // The server is back: uploads that failed while it was away (waiting out a backoff of up
          // to uploadBackoff.capMs) go again now, and the rest of the outbox with them.
          for (const wake of [...uploadsWaiting]) wake();
          void flushOutbox(viaChannel).catch((err: unknown) =>
            emit({ event: 'warning', message: `re-sending the outbox failed: ${String(err)}` }),
          );
        }
      },
    });
    channel = opened;
    const wrapped = channelClient(nodeClient, opened);
    const viaChannel: WorkDeps = { ...workDeps, client: wrapped };
    await opened.ready();
    return { client: wrapped, deps: viaChannel };
  }

  return {
    get nodeId() {
      return client?.nodeId;
    },
    get publicKeyHex() {
      return identity?.publicKeyHex;
    },
    async start() {
      if (client !== undefined) throw new Error('the agent was already started');
      identity = await loadOrCreateIdentity(options.dataDir);
      const nodeClient = createNodeClient({
        server: options.server,
        apiKey: options.apiKey,
        identity,
        ...(options.fetch ? { fetch: options.fetch } : {}),
      });
      client = nodeClient;
      const registered = await register(nodeClient);
      if (options.oci) {
        const removed = await removeLeftoverContainers(options.oci.probe.podman, registered.node_id);
        if (removed > 0)
          emit({
            event: 'warning',
            message: `removed ${removed} container(s) an earlier run of this node left behind`,
          });
      }
      emit({
        event: 'registered',
        node_id: registered.node_id,
        server: options.server,
        ...(options.country ? { country: options.country } : {}),
        models,
      });
      // Beat often enough that a lease never lapses while the node is alive: 3 times per lease.
      const beatMs = registered.lease_seconds
        ? Math.min(timing.heartbeatMs, (registered.lease_seconds * 1000) / 3)
        : timing.heartbeatMs;
      heartbeatTimer = setInterval(() => void heartbeat.beat(), beatMs);
      streamHeartbeatTimer = setInterval(() => {
        if ([...tracked.values()].some((w) => w.phase === 'running' && w.item?.stream === true)) void heartbeat.beat();
      }, timing.streamHeartbeatMs);
      if (await tsmAvailable(options.tee?.root)) {
        const attest = () =>
          attestWithTsm(nodeClient, { ...options.tee, signal: stopController.signal }).then(
            (a) =>
              emit({
                event: 'attested',
                attestation: a.attestation,
                verified: a.verified,
                failed: a.checks.filter((c) => !c.ok).map((c) => c.name),
                expires_at: a.expires_at,
              }),
            (err: unknown) =>
              emit({
                event: 'warning',
                message: `attestation failed: ${err instanceof Error ? err.message : String(err)}`,
              }),
          );
        await attest();
        attestTimer = setInterval(() => void attest(), options.tee?.reattestMs ?? 12 * 3_600_000);
        attestTimer.unref();
      }
      let workDeps = deps;
      if (workDeps === undefined) throw new Error('registration did not complete');
      let loopClient = nodeClient;
      if (options.channel !== false && typeof registered.channel === 'string') {
        ({ client: loopClient, deps: workDeps } = await openChannel(nodeClient, registered.channel, workDeps));
        client = loopClient;
        deps = workDeps;
      }
      loop = pollLoop(loopClient, workDeps).catch((err: unknown) =>
        emit({ event: 'warning', message: `the work loop stopped: ${String(err)}` }),
      );
      return registered;
    },
    stop(stopOptions = {}) {
      stopping ??= shutdown(stopOptions.graceMs ?? timing.graceMs);
      return stopping;
    },
  };
}

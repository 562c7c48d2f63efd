import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isTrustProxyEntry } from './client-address.js';

/** Everything `svc serve` can be told, after validation. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /**
   * The embedded store's shared buffers in MB (SVC_PGLITE_BUFFERS_MB, default 128, PGlite's own).
   * Smaller opens faster and takes less memory; the test suite uses 16.
   */
  pgliteBuffersMb: number;
  redisUrl: string | undefined;
  publicUrl: string;
  metricsToken: string | undefined;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  allowPrivateEgress: boolean;
  /**
   * The reverse proxies whose `X-Forwarded-For` names the client (SVC_TRUST_PROXY: addresses,
   * CIDRs, `loopback`, `linklocal`, `uniquelocal`; Fastify's `trustProxy`). Empty: the socket's
   * peer is the client, and `X-Forwarded-For` is ignored (docs/rate-limits.md).
   */
  trustProxy: string[];
  signingKeySeedHex: string | undefined;
  keyPepper: string | undefined;
  bodyLimitBytes: number;
  shutdownGraceMs: number;
  devMode: boolean;
  sessionTtlSeconds: number;
  freeTierCents: number;
  /**
   * A node's asking price per unit may be at most this many times the catalogue's published
   * maximum for the kind (SVC_MAX_PRICE_MULTIPLE, default 10; docs/billing.md).
   */
  maxPriceMultiple: number;
  minPasswordLength: number;
  rateLimits: RateLimitConfig;
  /** How long a node holds work between heartbeats before it goes elsewhere. */
  leaseSeconds: number;
  /**
   * How often the server pings each node channel (SVC_NODE_CHANNEL_PING_MS, default 5 s); a channel
   * that has not answered the last ping by the next one is dropped (docs/node-protocol.md).
   */
  nodeChannelPingMs: number;
  /**
   * How long direct work stays leased to a node after its channel drops, when the drop is not this
   * instance's shutdown (SVC_CHANNEL_LOSS_GRACE_MS, default 2 s): long enough for a node that is
   * still alive to reconnect (backoff 0.5 s) and heartbeat its work, short enough that an owner
   * whose node died moves on in seconds rather than after the lease. Also how long the work a node
   * never took stays leased to it once it is taken for gone after hanging up its long-poll
   * (modules/work/node-loss.ts).
   */
  channelLossGraceMs: number;
  /**
   * How long a node that hung up its long-poll has to make another signed call (to any instance)
   * before it is taken for gone (SVC_POLL_HANG_UP_GRACE_MS, default 2 s). A node polls again as
   * soon as an answer arrives, and one whose call failed backs off 0.5 s at first.
   */
  pollHangUpGraceMs: number;
  /** How long a gateway request may take end to end before it is a 504 (SVC_GATEWAY_TIMEOUT_MS). */
  gatewayTimeoutMs: number;
  /**
   * Credit reservations (docs/billing.md): how long one lives unless renewed
   * (SVC_RESERVATION_TTL_MS, default 30 s), and the least one refill takes of the available
   * balance (SVC_RESERVATION_SLICE_CENTS, default 500; a balance below it is reserved whole), and
   * the longest a take waits for other instances to give back unused credit before a 402
   * (SVC_RESERVATION_ASK_WAIT_MS, default 100; a give-back promised in time is waited for longer).
   */
  reservations: { ttlMs: number; sliceCents: number; askWaitMs: number };
  /**
   * The group-commit writer (platform/writer.ts): the longest a queued record waits
   * (SVC_WRITER_FLUSH_MS, default 2), and the longest a handed-over request's opening waits for
   * its completion to commit with it in one transaction (SVC_WRITER_OPENING_WAIT_MS, default 50).
   */
  writer: { flushMs: number; openingWaitMs: number };
  /** Lifetime of presigned file URLs (generated images), in seconds (SVC_FILE_URL_TTL_SECONDS). */
  fileUrlTtlSeconds: number;
  /**
   * The platform's default image for the oci runner, `ConfigResponse.default_runner_image`
   * (SVC_DEFAULT_RUNNER_IMAGE): a node holding it runs jobs naming no image in it when it loaded
   * none of its own. Unset: `process`, no platform image.
   */
  defaultRunnerImage: string;
  /** The dashboard's built static files, served at `/` (SVC_DASHBOARD_DIR; default packages/dashboard/dist). */
  dashboardDir: string;
  /** Browser origins allowed to call /mcp besides the server's own (SVC_MCP_ALLOWED_ORIGINS). */
  mcpAllowedOrigins: string[];
  knowledge: KnowledgeConfig;
  payments: PaymentsConfig;
  tee: TeeConfig;
  /** Work orders' repository hosts (docs/work-orders.md). */
  workOrders: { githubApiUrl: string; githubHosts: string[] };
  /** S3-compatible object storage for large files, when `SVC_S3_BUCKET` is set (else `<data dir>/objects`). */
  s3: S3Config | undefined;
  log: LogConfig;
}

/** The transparency log (docs/transparency-log.md). */
export interface LogConfig {
  /** SVC_LOG_ORIGIN: the name checkpoints are signed under; unset: the first name the store's log used. */
  origin: string | undefined;
  /** The name a new log takes when SVC_LOG_ORIGIN is unset: SVC_PUBLIC_URL's host and path, then `/log`. */
  derivedOrigin: string;
  /** SVC_LOG_CHECKPOINT_MS (default 1000): the least time between two signed checkpoints. */
  checkpointMs: number;
  /**
   * SVC_EVIDENCE_GATEWAY_ROWS=1: gateway requests' evidence events stored as rows and signed as
   * they close, as before 2026-11-27 (to compare; by default they are derived when read).
   */
  gatewayEventRows: boolean;
}

/** Payouts and top-ups (docs/payouts.md). */
export interface PaymentsConfig {
  /** `stripe` when SVC_STRIPE_SECRET_KEY is set (or SVC_PAYMENT_PROVIDER=stripe), else `local` (moves no money). */
  provider: 'stripe' | 'local';
  stripe: { secretKey: string; webhookSecret: string; apiBase?: string } | undefined;
  /** How often the payout run starts, in ms; 0 turns the schedule off (SVC_PAYOUT_INTERVAL, default 24h). */
  payoutIntervalMs: number;
  /** Payable earnings below this wait for the next run (SVC_PAYOUT_MINIMUM_CENTS, default 1,000). */
  payoutMinimumCents: number;
  /** Bounds of one top-up (SVC_TOPUP_MIN_CENTS, default 500; SVC_TOPUP_MAX_CENTS, default 1,000,000). */
  topupMinCents: number;
  topupMaxCents: number;
}

/** The sovereign pool's attestation policy (docs/attestation.md). */
export interface TeeConfig {
  /** TDX TCB statuses a node may have (SVC_TEE_ACCEPTED_TCB, default UpToDate,SWHardeningNeeded). */
  acceptedTcb: string[];
  /** Launch measurements (SEV-SNP MEASUREMENT, TDX MRTD; lowercase hex) a node may run (SVC_TEE_MEASUREMENTS; empty: none). */
  measurements: string[];
  /** Hours a verification lasts before the node must attest again (SVC_TEE_REATTEST_HOURS, default 24). */
  reattestHours: number;
}

/** `SVC_S3_BUCKET`, `SVC_S3_ENDPOINT` (omit for AWS itself); region and credentials come from the usual AWS variables. */
export interface S3Config {
  bucket: string;
  endpoint: string | undefined;
  /** `AWS_REGION` (or `AWS_DEFAULT_REGION`), default us-east-1. */
  region: string;
  /** Path-style addressing (`endpoint/bucket/key`): on whenever an endpoint is given, as MinIO and most S3-compatible servers need. */
  forcePathStyle: boolean;
  /** From `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`) when set; else the SDK's default chain (profiles, instance roles). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}

/** Knowledge bases (docs/knowledge-bases.md). */
export interface KnowledgeConfig {
  /** `auto`: pgvector with HNSW indexes where the extension can be created, else exact; `exact`: never pgvector (SVC_KB_VECTOR_SEARCH). */
  vectorSearch: 'auto' | 'exact';
  /** Largest document accepted, in bytes (SVC_KB_MAX_DOCUMENT_BYTES, default 20 MiB). */
  maxDocumentBytes: number;
  /** Chunks per embeddings request sent to a node (SVC_KB_EMBED_BATCH, default 64). */
  embedBatch: number;
  /** Embeddings requests one document keeps in flight (SVC_KB_EMBED_CONCURRENCY, default 4). */
  embedConcurrency: number;
  /** How long an instance owns a document's ingestion between progress reports (SVC_KB_LEASE_SECONDS, default 60). */
  leaseSeconds: number;
  /**
   * How long one document's ingestion keeps its turn before it gives it up to a waiting document
   * of an organization with fewer documents in progress (SVC_KB_SLICE_MS, default 5000; 0: at the
   * next batch). Without one waiting, it keeps going (docs/knowledge-bases.md, "Fair turns").
   */
  sliceMs: number;
  /** First wait before an embeddings batch is retried after no_capacity or a node failure, doubling each time (SVC_KB_RETRY_MS, default 1000). */
  retryBaseMs: number;
  /** Bounds of one document's extraction and chunking (docs/security.md, "Ingestion limits"). */
  parse: {
    /** Deepest Markdown list or quote nesting (SVC_KB_MAX_NESTING, default 100). */
    maxNesting: number;
    /** Most characters of extracted text (SVC_KB_MAX_TEXT_CHARS, default 20,000,000). */
    maxTextChars: number;
    /** Most chunks per document (SVC_KB_MAX_CHUNKS, default 50,000). */
    maxChunks: number;
    /** Heap of the parse worker thread in MB (SVC_KB_PARSE_HEAP_MB, default 512). */
    heapMb: number;
    /** Deadline of one parse in ms (SVC_KB_PARSE_TIMEOUT_MS, default 120,000). */
    timeoutMs: number;
    /** `worker` (default), or `inline` in the server process with no heap limit or deadline: debugging only (SVC_KB_PARSE_ISOLATION). */
    isolation: 'worker' | 'inline';
  };
}

/** Where `npm install` builds the dashboard (packages/dashboard/dist), next to this package. */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(new URL('../../../dashboard/dist', import.meta.url));

/** Token buckets: `ratePerSec` refill, `burst` capacity. */
export interface RateLimitConfig {
  key: { ratePerSec: number; burst: number };
  org: { ratePerSec: number; burst: number };
  anonymous: { ratePerSec: number; burst: number };
  login: { ratePerSec: number; burst: number };
  /** Sign-ups per client address (each one grants the free tier). */
  signup: { ratePerSec: number; burst: number };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Flags as parsed from the command line (`--port 9000` -> `{port: '9000'}`). */
export type ConfigFlags = Partial<Record<'port' | 'host' | 'data-dir' | 'public-url' | 'log-level', string>> & {
  'allow-private-egress'?: boolean;
};

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function parseIntIn(name: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw.trim()))
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`);
  const value = Number(raw.trim());
  if (value < min || value > max)
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`);
  return value;
}

/** An integer setting from `env[name]` within `min`..`max`, or `fallback` when unset or empty. */
function intSetting(env: NodeJS.ProcessEnv, name: string, min: number, max: number, fallback: number): number {
  const raw = env[name];
  return raw ? parseIntIn(name, raw, min, max) : fallback;
}

function parseBool(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw new ConfigError(`${name} must be 1/0, true/false, yes/no or on/off, got '${raw}'`);
}

function parseChoice<T extends string>(name: string, raw: string | undefined, choices: readonly T[], fallback: T): T {
  if (raw === undefined || raw === '') return fallback;
  const value = choices.find((c) => c === raw.trim());
  if (!value) throw new ConfigError(`${name} must be one of ${choices.join(', ')}, got '${raw}'`);
  return value;
}

/** `24h`, `30m`, `90s`, `1d` or a number of milliseconds; `0` or `off` is 0 (never). */
function parseDuration(name: string, raw: string): number {
  const v = raw.trim().toLowerCase();
  if (v === 'off' || v === '0') return 0;
  const match = /^(\d{1,9})(ms|s|m|h|d)?$/.exec(v);
  if (!match) throw new ConfigError(`${name} must be a duration like 24h, 30m, 90s, 1d or off, got '${raw}'`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[
    (match[2] ?? 'ms') as 'ms' | 's' | 'm' | 'h' | 'd'
  ];
  const value = Number(match[1]) * unit;
  if (value < 1_000 || value > 366 * 86_400_000)
    throw new ConfigError(`${name} must be between 1s and 366d, got '${raw}'`);
  return value;
}

function parsePayments(env: NodeJS.ProcessEnv): PaymentsConfig {
  const secretKey = env.SVC_STRIPE_SECRET_KEY || undefined;
  const provider = parseChoice(
    'SVC_PAYMENT_PROVIDER',
    env.SVC_PAYMENT_PROVIDER,
    ['stripe', 'local'] as const,
    secretKey ? 'stripe' : 'local',
  );
  let stripe: PaymentsConfig['stripe'];
  if (provider === 'stripe') {
    if (!secretKey) throw new ConfigError('SVC_PAYMENT_PROVIDER=stripe needs SVC_STRIPE_SECRET_KEY');
    const webhookSecret = env.SVC_STRIPE_WEBHOOK_SECRET || '';
    if (!webhookSecret.startsWith('whsec_'))
      throw new ConfigError(
        "SVC_STRIPE_WEBHOOK_SECRET must be set to the endpoint's signing secret (whsec_...) when Stripe is the provider",
      );
    const apiBase = env.SVC_STRIPE_API_BASE
      ? parseUrl('SVC_STRIPE_API_BASE', env.SVC_STRIPE_API_BASE, ['http:', 'https:'])
      : undefined;
    stripe = { secretKey, webhookSecret, apiBase };
  }
  const topupMinCents = intSetting(env, 'SVC_TOPUP_MIN_CENTS', 1, 100_000_000, 500);
  const topupMaxCents = intSetting(
    env,
    'SVC_TOPUP_MAX_CENTS',
    topupMinCents,
    100_000_000,
    Math.max(1_000_000, topupMinCents),
  );
  return {
    provider,
    stripe,
    payoutIntervalMs: env.SVC_PAYOUT_INTERVAL
      ? parseDuration('SVC_PAYOUT_INTERVAL', env.SVC_PAYOUT_INTERVAL)
      : 86_400_000,
    payoutMinimumCents: intSetting(env, 'SVC_PAYOUT_MINIMUM_CENTS', 1, 100_000_000, 1_000),
    topupMinCents,
    topupMaxCents,
  };
}

function parseUrl(name: string, raw: string, protocols: string[]): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got '${redactUrl(raw)}'`);
  }
  if (!protocols.includes(url.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got '${url.protocol}'`);
  }
  return raw;
}

/** Replaces a URL's password with `***` so it can be shown in messages and logs. */
export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '<unparseable>';
  }
}

/** A note key name (golang.org/x/mod/sumdb/note): printable, no white space, no `+`. */
function isLogOrigin(name: string): boolean {
  return name.length <= 256 && /^[\x21-\x7e]+$/.test(name) && !name.includes('+');
}

/**
 * Builds the configuration from flags (first) and `SVC_*` environment variables (second).
 * Throws ConfigError with a message naming the variable for any bad value.
 *
 * @example
 * const config = loadConfig({ port: '9000' }, process.env);
 */
export function loadConfig(flags: ConfigFlags, env: NodeJS.ProcessEnv): Config {
  const num = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0 || value > 1_000_000)
      throw new ConfigError(`${name} must be a positive number up to 1000000, got '${raw}'`);
    return value;
  };
  const pick = (flag: keyof ConfigFlags, envName: string): [string, string] | undefined => {
    const fromFlag = flags[flag];
    if (typeof fromFlag === 'string') return [`--${flag}`, fromFlag];
    const fromEnv = env[envName];
    if (fromEnv !== undefined && fromEnv !== '') return [envName, fromEnv];
    return undefined;
  };
  const portRaw = pick('port', 'SVC_PORT');
  const port = portRaw ? parseIntIn(portRaw[0], portRaw[1], 0, 65535) : 8080;
  const host = pick('host', 'SVC_HOST')?.[1] ?? '127.0.0.1';
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(host))
    throw new ConfigError(`SVC_HOST must be a host name or address, got '${host}'`);
  const dataDir = resolve(pick('data-dir', 'SVC_DATA_DIR')?.[1] ?? './.svc');
  const databaseUrl = env.DATABASE_URL
    ? parseUrl('DATABASE_URL', env.DATABASE_URL, ['postgres:', 'postgresql:'])
    : undefined;
  const redisUrl = env.SVC_REDIS_URL ? parseUrl('SVC_REDIS_URL', env.SVC_REDIS_URL, ['redis:', 'rediss:']) : undefined;
  const publicRaw = pick('public-url', 'SVC_PUBLIC_URL');
  const publicUrl = (
    publicRaw
      ? parseUrl(publicRaw[0], publicRaw[1], ['http:', 'https:'])
      : `http://${host.includes(':') ? `[${host}]` : host}:${port}`
  ).replace(/\/+$/, '');
  const levelRaw = pick('log-level', 'SVC_LOG_LEVEL')?.[1] ?? 'info';
  const logLevel = LOG_LEVELS.find((l) => l === levelRaw);
  if (!logLevel) throw new ConfigError(`SVC_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${levelRaw}'`);
  const signingKeySeedHex = env.SVC_SIGNING_KEY || undefined;
  if (signingKeySeedHex !== undefined && !/^[0-9a-f]{64}$/.test(signingKeySeedHex)) {
    throw new ConfigError('SVC_SIGNING_KEY must be an Ed25519 seed of 64 lowercase hex characters');
  }
  const keyPepper = env.SVC_KEY_PEPPER || undefined;
  if (keyPepper !== undefined && keyPepper.length < 32)
    throw new ConfigError('SVC_KEY_PEPPER must be at least 32 characters');
  const metricsToken = env.SVC_METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && metricsToken.length < 16)
    throw new ConfigError('SVC_METRICS_TOKEN must be at least 16 characters');
  const mcpAllowedOrigins = (env.SVC_MCP_ALLOWED_ORIGINS ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean)
    .map((o) => {
      const origin = parseUrl('SVC_MCP_ALLOWED_ORIGINS', o, ['http:', 'https:']);
      if (new URL(origin).origin !== origin.replace(/\/+$/, ''))
        throw new ConfigError(`SVC_MCP_ALLOWED_ORIGINS entries must be origins (scheme://host[:port]), got '${o}'`);
      return new URL(origin).origin;
    });
  const trustProxy = (env.SVC_TRUST_PROXY ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  for (const entry of trustProxy)
    if (!isTrustProxyEntry(entry))
      throw new ConfigError(
        `SVC_TRUST_PROXY must list proxy addresses, CIDRs, loopback, linklocal or uniquelocal, got '${entry}'`,
      );
  const s3Bucket = env.SVC_S3_BUCKET || undefined;
  if (s3Bucket !== undefined && !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(s3Bucket))
    throw new ConfigError(`SVC_S3_BUCKET must be an S3 bucket name, got '${s3Bucket}'`);
  const s3Endpoint = env.SVC_S3_ENDPOINT
    ? parseUrl('SVC_S3_ENDPOINT', env.SVC_S3_ENDPOINT, ['http:', 'https:'])
    : undefined;
  if (s3Endpoint && !s3Bucket)
    throw new ConfigError('SVC_S3_ENDPOINT is set but SVC_S3_BUCKET is not: name the bucket to store objects in');
  const s3Credentials =
    env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
      ? {
          accessKeyId: env.AWS_ACCESS_KEY_ID,
          secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
          ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
        }
      : undefined;
  const s3: S3Config | undefined = s3Bucket
    ? {
        bucket: s3Bucket,
        endpoint: s3Endpoint,
        region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
        forcePathStyle: s3Endpoint !== undefined,
        ...(s3Credentials ? { credentials: s3Credentials } : {}),
      }
    : undefined;
  const logOrigin = env.SVC_LOG_ORIGIN || undefined;
  if (logOrigin !== undefined && !isLogOrigin(logOrigin))
    throw new ConfigError(
      `SVC_LOG_ORIGIN must be a note key name (printable, no spaces, no '+', up to 256 characters), got '${logOrigin}'`,
    );
  const publicParts = new URL(publicUrl);
  const derivedOrigin = `${publicParts.host}${publicParts.pathname.replace(/\/+$/, '')}/log`.replace(/[\s+]/gu, '-');
  const defaultRunnerImage = env.SVC_DEFAULT_RUNNER_IMAGE || 'process';
  // The pattern of a job's `image` (CreateJobRequest): what matching compares with a node's `image:<ref>`.
  if (!/^[a-z0-9][a-z0-9._/:@-]{0,159}$/.test(defaultRunnerImage))
    throw new ConfigError(
      `SVC_DEFAULT_RUNNER_IMAGE must be an image reference (lowercase, e.g. localhost/svc-runner:1), got '${defaultRunnerImage}'`,
    );
  return {
    defaultRunnerImage,
    s3,
    log: {
      origin: logOrigin,
      derivedOrigin,
      checkpointMs: intSetting(env, 'SVC_LOG_CHECKPOINT_MS', 10, 3_600_000, 1000),
      gatewayEventRows: env.SVC_EVIDENCE_GATEWAY_ROWS === '1',
    },
    mcpAllowedOrigins,
    port,
    host,
    dataDir,
    databaseUrl,
    pgliteBuffersMb: intSetting(env, 'SVC_PGLITE_BUFFERS_MB', 1, 1024, 128),
    redisUrl,
    publicUrl,
    metricsToken,
    logLevel,
    allowPrivateEgress:
      flags['allow-private-egress'] === true ||
      parseBool('SVC_ALLOW_PRIVATE_EGRESS', env.SVC_ALLOW_PRIVATE_EGRESS ?? ''),
    trustProxy,
    signingKeySeedHex,
    keyPepper,
    bodyLimitBytes: intSetting(env, 'SVC_BODY_LIMIT_BYTES', 1024, 64 * 1024 * 1024, 1024 * 1024),
    shutdownGraceMs: intSetting(env, 'SVC_SHUTDOWN_GRACE_MS', 0, 600_000, 10_000),
    devMode: parseBool('SVC_DEV_MODE', env.SVC_DEV_MODE ?? ''),
    sessionTtlSeconds: intSetting(env, 'SVC_SESSION_TTL_SECONDS', 60, 90 * 86_400, 86_400),
    maxPriceMultiple: num('SVC_MAX_PRICE_MULTIPLE', 10),
    freeTierCents: intSetting(env, 'SVC_FREE_TIER_CENTS', 0, 100_000_000, 500),
    minPasswordLength: 10,
    gatewayTimeoutMs: intSetting(env, 'SVC_GATEWAY_TIMEOUT_MS', 1_000, 3_600_000, 120_000),
    reservations: {
      ttlMs: intSetting(env, 'SVC_RESERVATION_TTL_MS', 1_000, 3_600_000, 30_000),
      sliceCents: intSetting(env, 'SVC_RESERVATION_SLICE_CENTS', 1, 100_000_000, 500),
      askWaitMs: intSetting(env, 'SVC_RESERVATION_ASK_WAIT_MS', 0, 10_000, 100),
    },
    writer: {
      flushMs: intSetting(env, 'SVC_WRITER_FLUSH_MS', 0, 60_000, 2),
      openingWaitMs: intSetting(env, 'SVC_WRITER_OPENING_WAIT_MS', 0, 60_000, 50),
    },
    fileUrlTtlSeconds: intSetting(env, 'SVC_FILE_URL_TTL_SECONDS', 1, 7 * 86_400, 3_600),
    dashboardDir: resolve(env.SVC_DASHBOARD_DIR || DEFAULT_DASHBOARD_DIR),
    workOrders: {
      githubApiUrl: (env.SVC_GITHUB_API_URL || 'https://api.github.com').replace(/\/+$/, ''),
      githubHosts: (env.SVC_GITHUB_HOSTS || 'github.com')
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean),
    },
    knowledge: {
      vectorSearch: parseChoice('SVC_KB_VECTOR_SEARCH', env.SVC_KB_VECTOR_SEARCH, ['auto', 'exact'] as const, 'auto'),
      maxDocumentBytes: intSetting(env, 'SVC_KB_MAX_DOCUMENT_BYTES', 1024, 256 * 1024 * 1024, 20 * 1024 * 1024),
      embedBatch: intSetting(env, 'SVC_KB_EMBED_BATCH', 1, 2048, 64),
      embedConcurrency: intSetting(env, 'SVC_KB_EMBED_CONCURRENCY', 1, 64, 4),
      leaseSeconds: intSetting(env, 'SVC_KB_LEASE_SECONDS', 1, 3600, 60),
      sliceMs: intSetting(env, 'SVC_KB_SLICE_MS', 0, 3_600_000, 5_000),
      retryBaseMs: intSetting(env, 'SVC_KB_RETRY_MS', 0, 600_000, 1_000),
      parse: {
        maxNesting: intSetting(env, 'SVC_KB_MAX_NESTING', 1, 10_000, 100),
        maxTextChars: intSetting(env, 'SVC_KB_MAX_TEXT_CHARS', 1, 1_000_000_000, 20_000_000),
        maxChunks: intSetting(env, 'SVC_KB_MAX_CHUNKS', 1, 10_000_000, 50_000),
        heapMb: intSetting(env, 'SVC_KB_PARSE_HEAP_MB', 16, 65_536, 512),
        timeoutMs: intSetting(env, 'SVC_KB_PARSE_TIMEOUT_MS', 100, 3_600_000, 120_000),
        isolation: parseChoice(
          'SVC_KB_PARSE_ISOLATION',
          env.SVC_KB_PARSE_ISOLATION,
          ['worker', 'inline'] as const,
          'worker',
        ),
      },
    },
    payments: parsePayments(env),
    leaseSeconds: intSetting(env, 'SVC_LEASE_SECONDS', 2, 600, 30),
    nodeChannelPingMs: intSetting(env, 'SVC_NODE_CHANNEL_PING_MS', 100, 60_000, 5_000),
    channelLossGraceMs: intSetting(env, 'SVC_CHANNEL_LOSS_GRACE_MS', 100, 60_000, 2_000),
    pollHangUpGraceMs: intSetting(env, 'SVC_POLL_HANG_UP_GRACE_MS', 100, 60_000, 2_000),
    tee: {
      acceptedTcb: (env.SVC_TEE_ACCEPTED_TCB || 'UpToDate,SWHardeningNeeded')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
      measurements: (env.SVC_TEE_MEASUREMENTS ?? '')
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean)
        .map((m) => {
          if (!/^[0-9a-f]{96}$/.test(m))
            throw new ConfigError(
              `SVC_TEE_MEASUREMENTS must list 96-hex-character measurements (SEV-SNP MEASUREMENT or TDX MRTD), got '${m}'`,
            );
          return m;
        }),
      reattestHours: intSetting(env, 'SVC_TEE_REATTEST_HOURS', 1, 24 * 365, 24),
    },
    rateLimits: {
      key: { ratePerSec: num('SVC_RATE_LIMIT_RPS', 50), burst: num('SVC_RATE_LIMIT_BURST', 100) },
      org: { ratePerSec: num('SVC_ORG_RATE_LIMIT_RPS', 200), burst: num('SVC_ORG_RATE_LIMIT_BURST', 400) },
      anonymous: { ratePerSec: num('SVC_ANON_RATE_LIMIT_RPS', 20), burst: num('SVC_ANON_RATE_LIMIT_BURST', 60) },
      // 10 attempts, then one more every 90 s, per email and per client address.
      login: { ratePerSec: 1 / 90, burst: num('SVC_LOGIN_ATTEMPTS_BURST', 10) },
      // 5 sign-ups, then 5 more per hour, per client address: the free tier is not a faucet.
      signup: {
        ratePerSec: num('SVC_SIGNUP_RATE_LIMIT_PER_HOUR', 5) / 3600,
        burst: num('SVC_SIGNUP_RATE_LIMIT_BURST', 5),
      },
    },
  };
}

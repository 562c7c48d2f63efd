import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Everything `svc serve` can be told, after validation. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  publicUrl: string;
  metricsToken: string | undefined;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  allowPrivateEgress: boolean;
  signingKeySeedHex: string | undefined;
  keyPepper: string | undefined;
  bodyLimitBytes: number;
  shutdownGraceMs: number;
  devMode: boolean;
  sessionTtlSeconds: number;
  freeTierCents: number;
  minPasswordLength: number;
  rateLimits: RateLimitConfig;
  /** How long a node holds work between heartbeats before it goes elsewhere. */
  leaseSeconds: number;
  /** How long a gateway request may take end to end before it is a 504 (SVC_GATEWAY_TIMEOUT_MS). */
  gatewayTimeoutMs: number;
  /** Lifetime of presigned file URLs (generated images), in seconds (SVC_FILE_URL_TTL_SECONDS). */
  fileUrlTtlSeconds: number;
  /** The dashboard's built static files, served at `/` (SVC_DASHBOARD_DIR; default packages/dashboard/dist). */
  dashboardDir: string;
  /** Browser origins allowed to call /mcp besides the server's own (SVC_MCP_ALLOWED_ORIGINS). */
  mcpAllowedOrigins: string[];
  knowledge: KnowledgeConfig;
  /** S3-compatible object storage for large files, when `SVC_S3_BUCKET` is set (else `<data dir>/objects`). */
  s3: S3Config | undefined;
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
  /** First wait before an embeddings batch is retried after no_capacity or a node failure, doubling each time (SVC_KB_RETRY_MS, default 1000). */
  retryBaseMs: number;
}

/** Where `npm install` builds the dashboard (packages/dashboard/dist), next to this package. */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(new URL('../../../dashboard/dist', import.meta.url));

/** Token buckets: `ratePerSec` refill, `burst` capacity. */
export interface RateLimitConfig {
  key: { ratePerSec: number; burst: number };
  org: { ratePerSec: number; burst: number };
  anonymous: { ratePerSec: number; burst: number };
  login: { ratePerSec: number; burst: number };
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
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`);
  return value;
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
    if (!Number.isFinite(value) || value <= 0 || value > 1_000_000) throw new ConfigError(`${name} must be a positive number up to 1000000, got '${raw}'`);
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
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(host)) throw new ConfigError(`SVC_HOST must be a host name or address, got '${host}'`);
  const dataDir = resolve(pick('data-dir', 'SVC_DATA_DIR')?.[1] ?? './.svc');
  const databaseUrl = env.DATABASE_URL ? parseUrl('DATABASE_URL', env.DATABASE_URL, ['postgres:', 'postgresql:']) : undefined;
  const redisUrl = env.SVC_REDIS_URL ? parseUrl('SVC_REDIS_URL', env.SVC_REDIS_URL, ['redis:', 'rediss:']) : undefined;
  const publicRaw = pick('public-url', 'SVC_PUBLIC_URL');
  const publicUrl = (publicRaw ? parseUrl(publicRaw[0], publicRaw[1], ['http:', 'https:']) : `http://${host.includes(':') ? `[${host}]` : host}:${port}`).replace(/\/+$/, '');
  const levelRaw = pick('log-level', 'SVC_LOG_LEVEL')?.[1] ?? 'info';
  const logLevel = LOG_LEVELS.find((l) => l === levelRaw);
  if (!logLevel) throw new ConfigError(`SVC_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${levelRaw}'`);
  const signingKeySeedHex = env.SVC_SIGNING_KEY || undefined;
  if (signingKeySeedHex !== undefined && !/^[0-9a-f]{64}$/.test(signingKeySeedHex)) {
    throw new ConfigError('SVC_SIGNING_KEY must be an Ed25519 seed of 64 lowercase hex characters');
  }
  const keyPepper = env.SVC_KEY_PEPPER || undefined;
  if (keyPepper !== undefined && keyPepper.length < 32) throw new ConfigError('SVC_KEY_PEPPER must be at least 32 characters');
  const metricsToken = env.SVC_METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && metricsToken.length < 16) throw new ConfigError('SVC_METRICS_TOKEN must be at least 16 characters');
  const mcpAllowedOrigins = (env.SVC_MCP_ALLOWED_ORIGINS ?? '').split(',').map((o) => o.trim()).filter(Boolean).map((o) => {
    const origin = parseUrl('SVC_MCP_ALLOWED_ORIGINS', o, ['http:', 'https:']);
    if (new URL(origin).origin !== origin.replace(/\/+$/, '')) throw new ConfigError(`SVC_MCP_ALLOWED_ORIGINS entries must be origins (scheme://host[:port]), got '${o}'`);
    return new URL(origin).origin;
  });
  const s3Bucket = env.SVC_S3_BUCKET || undefined;
  if (s3Bucket !== undefined && !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(s3Bucket)) throw new ConfigError(`SVC_S3_BUCKET must be an S3 bucket name, got '${s3Bucket}'`);
  const s3Endpoint = env.SVC_S3_ENDPOINT ? parseUrl('SVC_S3_ENDPOINT', env.SVC_S3_ENDPOINT, ['http:', 'https:']) : undefined;
  if (s3Endpoint && !s3Bucket) throw new ConfigError('SVC_S3_ENDPOINT is set but SVC_S3_BUCKET is not: name the bucket to store objects in');
  const s3Credentials = env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
    ? { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) }
    : undefined;
  const s3: S3Config | undefined = s3Bucket
    ? { bucket: s3Bucket, endpoint: s3Endpoint, region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1', forcePathStyle: s3Endpoint !== undefined, ...(s3Credentials ? { credentials: s3Credentials } : {}) }
    : undefined;
  return {
    s3,
    mcpAllowedOrigins,
    port,
    host,
    dataDir,
    databaseUrl,
    redisUrl,
    publicUrl,
    metricsToken,
    logLevel,
    allowPrivateEgress: flags['allow-private-egress'] === true || parseBool('SVC_ALLOW_PRIVATE_EGRESS', env.SVC_ALLOW_PRIVATE_EGRESS ?? ''),
    signingKeySeedHex,
    keyPepper,
    bodyLimitBytes: env.SVC_BODY_LIMIT_BYTES ? parseIntIn('SVC_BODY_LIMIT_BYTES', env.SVC_BODY_LIMIT_BYTES, 1024, 64 * 1024 * 1024) : 1024 * 1024,
    shutdownGraceMs: env.SVC_SHUTDOWN_GRACE_MS ? parseIntIn('SVC_SHUTDOWN_GRACE_MS', env.SVC_SHUTDOWN_GRACE_MS, 0, 600_000) : 10_000,
    devMode: parseBool('SVC_DEV_MODE', env.SVC_DEV_MODE ?? ''),
    sessionTtlSeconds: env.SVC_SESSION_TTL_SECONDS ? parseIntIn('SVC_SESSION_TTL_SECONDS', env.SVC_SESSION_TTL_SECONDS, 60, 90 * 86_400) : 86_400,
    freeTierCents: env.SVC_FREE_TIER_CENTS ? parseIntIn('SVC_FREE_TIER_CENTS', env.SVC_FREE_TIER_CENTS, 0, 100_000_000) : 500,
    minPasswordLength: 10,
    gatewayTimeoutMs: env.SVC_GATEWAY_TIMEOUT_MS ? parseIntIn('SVC_GATEWAY_TIMEOUT_MS', env.SVC_GATEWAY_TIMEOUT_MS, 1_000, 3_600_000) : 120_000,
    fileUrlTtlSeconds: env.SVC_FILE_URL_TTL_SECONDS ? parseIntIn('SVC_FILE_URL_TTL_SECONDS', env.SVC_FILE_URL_TTL_SECONDS, 1, 7 * 86_400) : 3_600,
    dashboardDir: resolve(env.SVC_DASHBOARD_DIR || DEFAULT_DASHBOARD_DIR),
    knowledge: {
      vectorSearch: parseChoice('SVC_KB_VECTOR_SEARCH', env.SVC_KB_VECTOR_SEARCH, ['auto', 'exact'] as const, 'auto'),
      maxDocumentBytes: env.SVC_KB_MAX_DOCUMENT_BYTES ? parseIntIn('SVC_KB_MAX_DOCUMENT_BYTES', env.SVC_KB_MAX_DOCUMENT_BYTES, 1024, 256 * 1024 * 1024) : 20 * 1024 * 1024,
      embedBatch: env.SVC_KB_EMBED_BATCH ? parseIntIn('SVC_KB_EMBED_BATCH', env.SVC_KB_EMBED_BATCH, 1, 2048) : 64,
      embedConcurrency: env.SVC_KB_EMBED_CONCURRENCY ? parseIntIn('SVC_KB_EMBED_CONCURRENCY', env.SVC_KB_EMBED_CONCURRENCY, 1, 64) : 4,
      leaseSeconds: env.SVC_KB_LEASE_SECONDS ? parseIntIn('SVC_KB_LEASE_SECONDS', env.SVC_KB_LEASE_SECONDS, 1, 3600) : 60,
      retryBaseMs: env.SVC_KB_RETRY_MS ? parseIntIn('SVC_KB_RETRY_MS', env.SVC_KB_RETRY_MS, 0, 600_000) : 1_000,
    },
    leaseSeconds: env.SVC_LEASE_SECONDS ? parseIntIn('SVC_LEASE_SECONDS', env.SVC_LEASE_SECONDS, 2, 600) : 30,
    rateLimits: {
      key: { ratePerSec: num('SVC_RATE_LIMIT_RPS', 50), burst: num('SVC_RATE_LIMIT_BURST', 100) },
      org: { ratePerSec: num('SVC_ORG_RATE_LIMIT_RPS', 200), burst: num('SVC_ORG_RATE_LIMIT_BURST', 400) },
      anonymous: { ratePerSec: num('SVC_ANON_RATE_LIMIT_RPS', 20), burst: num('SVC_ANON_RATE_LIMIT_BURST', 60) },
      // 10 attempts, then one more every 90 s, per email and per client address.
      login: { ratePerSec: 1 / 90, burst: num('SVC_LOGIN_ATTEMPTS_BURST', 10) },
    },
  };
}

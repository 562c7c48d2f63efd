import {
  canonicalJson,
  canonicalSha256Hex,
  manifestBytes,
  parseCaptureManifest,
  type CaptureManifest,
} from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import type { PlatformServices } from '../../platform/services.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { closeRun, openRun, recordEvents } from '../evidence/recorder.js';
import { policyId } from '../evidence/events.js';
import type {
  CaptureSetCompleteRequest,
  CaptureSetCreateRequest,
  SiteCreateRequest,
  SiteEpochCreateRequest,
  SiteUpdateRequest,
} from './schemas.js';
import { refusal, statesBefore, type CaptureStatus } from './states.js';
import * as store from './store.js';
import { checkFiles, mismatchReason } from './verify.js';
import { captureSetView, epochView, fileView, siteView } from './views.js';

/** The rules of sites, epochs and capture sets (DESIGN.md section 14); HTTP in routes.ts, SQL in store.ts. */

const notFound = (what: string, id: string) => new ApiError('not_found', `${what} ${id} not found`);

export async function createSite(ctx: PlatformServices, principal: Principal, body: Static<typeof SiteCreateRequest>) {
  const site = await store.insertSite(ctx.db, {
    id: newId('site'),
    org_id: principal.orgId,
    name: body.name.trim() || body.name,
    country: body.country ?? null,
    latitude: body.latitude ?? null,
    longitude: body.longitude ?? null,
    description: body.description ?? null,
    created_by: principal.buyerId,
  });
  return siteView(site);
}

export async function listSites(
  ctx: PlatformServices,
  principal: Principal,
  page: { limit?: number | undefined; offset?: number | undefined },
) {
  const limit = page.limit ?? 100;
  const offset = page.offset ?? 0;
  const { rows, total } = await store.listSites(ctx.db, principal.orgId, { limit, offset });
  return { sites: rows.map(siteView), total, limit, offset };
}

async function siteOf(db: Queryable, principal: Principal, id: string) {
  const site = await store.findSite(db, principal.orgId, id);
  if (!site) throw notFound('site', id);
  return site;
}

export async function getSite(ctx: PlatformServices, principal: Principal, id: string) {
  return siteView(await siteOf(ctx.db, principal, id));
}

export async function updateSite(
  ctx: PlatformServices,
  principal: Principal,
  id: string,
  body: Static<typeof SiteUpdateRequest>,
) {
  if (body.name === null)
    throw new ApiError('invalid_request', 'a site must keep a name', [{ path: '/name', message: 'must be a string' }]);
  const site = await store.updateSite(ctx.db, principal.orgId, id, {
    ...body,
    ...(body.name !== undefined ? { name: body.name.trim() || body.name } : {}),
  });
  if (!site) throw notFound('site', id);
  return siteView(site);
}

/** Deletes a site with its epochs; refused (409) while any epoch holds a capture set, whose files and evidence must stay. */
export async function deleteSite(ctx: PlatformServices, principal: Principal, id: string) {
  return ctx.db.transaction(async (tx) => {
    const site = await siteOf(tx, principal, id);
    const sets = await store.countCaptureSetsOfSite(tx, site.id);
    if (sets > 0)
      throw new ApiError(
        'conflict',
        `site ${id} has ${sets} capture set${sets === 1 ? '' : 's'}; a site with capture sets cannot be deleted`,
      );
    await store.deleteSite(tx, principal.orgId, id);
    return { id, deleted: true };
  });
}

export async function createEpoch(
  ctx: PlatformServices,
  principal: Principal,
  siteId: string,
  body: Static<typeof SiteEpochCreateRequest>,
) {
  const site = await siteOf(ctx.db, principal, siteId);
  const from = body.captured_from ? new Date(body.captured_from) : null;
  const to = body.captured_to ? new Date(body.captured_to) : null;
  if (from && to && from > to)
    throw new ApiError('invalid_request', 'captured_from must not be after captured_to', [
      { path: '/captured_to', message: 'must not be before captured_from' },
    ]);
  const epoch = await store.insertEpoch(ctx.db, {
    id: newId('epoch'),
    org_id: principal.orgId,
    site_id: site.id,
    label: body.label.trim() || body.label,
    captured_from: from,
    captured_to: to,
  });
  return epochView(epoch);
}

export async function listEpochs(ctx: PlatformServices, principal: Principal, siteId: string) {
  const site = await siteOf(ctx.db, principal, siteId);
  const epochs = await store.listEpochs(ctx.db, site.id);
  return { epochs: epochs.map(epochView), site: siteView(site), total: epochs.length };
}

async function epochWithSite(db: Queryable, principal: Principal, epochId: string) {
  const epoch = await store.findEpoch(db, principal.orgId, epochId);
  if (!epoch) throw notFound('epoch', epochId);
  const site = await siteOf(db, principal, epoch.site_id);
  return { epoch, site };
}

export async function getEpoch(ctx: PlatformServices, principal: Principal, id: string) {
  return epochView((await epochWithSite(ctx.db, principal, id)).epoch);
}

/** The manifest of a request, checked (400 naming each problem), or an empty one when absent. */
function manifestOf(input: unknown, at: string): CaptureManifest {
  if (input === undefined) return { version: '1', files: [] };
  const parsed = parseCaptureManifest(input, at);
  if ('problems' in parsed) {
    const first = parsed.problems[0];
    throw new ApiError(
      'invalid_request',
      `the manifest is invalid: ${first ? `${first.path} ${first.message}` : 'unknown problem'}${parsed.problems.length > 1 ? ` (and ${parsed.problems.length - 1} more)` : ''}`,
      parsed.problems,
    );
  }
  return parsed.manifest;
}

/** `raw_bytes` and `total_files`, when a client sends them, must agree with the manifest. */
function checkTotals(
  manifest: CaptureManifest,
  body: { raw_bytes?: number | undefined; total_files?: number | undefined },
): void {
  const bytes = manifestBytes(manifest);
  if (body.raw_bytes !== undefined && body.raw_bytes !== bytes)
    throw new ApiError(
      'invalid_request',
      `raw_bytes is ${body.raw_bytes} but the manifest's files add up to ${bytes} bytes`,
      [{ path: '/raw_bytes', message: `must equal ${bytes}` }],
    );
  if (body.total_files !== undefined && body.total_files !== manifest.files.length) {
    throw new ApiError(
      'invalid_request',
      `total_files is ${body.total_files} but the manifest lists ${manifest.files.length}`,
      [{ path: '/total_files', message: `must equal ${manifest.files.length}` }],
    );
  }
}

async function response(db: Queryable, principal: Principal, set: store.CaptureSetRow) {
  const [{ epoch, site }, files] = await Promise.all([
    epochWithSite(db, principal, set.site_epoch_id),
    store.filesOf(db, set.id),
  ]);
  return {
    capture_set: captureSetView(set),
    epoch: epochView(epoch),
    site: siteView(site),
    files: files.map(fileView),
  };
}

export async function createCaptureSet(
  ctx: PlatformServices,
  principal: Principal,
  body: Static<typeof CaptureSetCreateRequest>,
) {
  const manifest = manifestOf(body.manifest, '/manifest');
  checkTotals(manifest, body);
  if (
    body.manifest_version !== undefined &&
    body.manifest !== undefined &&
    (body.manifest as { version?: unknown }).version !== undefined &&
    body.manifest_version !== manifest.version
  ) {
    throw new ApiError(
      'invalid_request',
      `manifest_version ${body.manifest_version} differs from the manifest's version ${manifest.version}`,
      [{ path: '/manifest_version', message: `must equal ${manifest.version}` }],
    );
  }
  if (body.status !== undefined && body.status !== 'pending_upload')
    throw new ApiError(
      'conflict',
      `a new capture set starts in pending_upload; it cannot be created as ${body.status}`,
    );
  const version = body.manifest_version ?? manifest.version;
  const normalised: CaptureManifest = { version, files: manifest.files };
  const set = await ctx.db.transaction(async (tx) => {
    const { epoch, site } = await epochWithSite(tx, principal, body.site_epoch_id);
    const row = await store.insertCaptureSet(
      tx,
      {
        id: newId('cs'),
        org_id: principal.orgId,
        site_epoch_id: epoch.id,
        source_partner_id: body.source_partner_id ?? null,
        source_type: body.source_type ?? null,
        accuracy_profile: body.accuracy_profile ?? null,
        ingest_mode: body.ingest_mode ?? null,
        manifest_version: version,
        manifest_json: JSON.stringify(normalised),
        status: 'pending_upload',
        raw_bytes: manifestBytes(manifest),
        total_files: manifest.files.length,
        created_by: principal.buyerId,
      },
      manifest.files,
    );
    const policy = { site_id: site.id, epoch_id: epoch.id, manifest_sha256: canonicalSha256Hex(normalised) };
    await openRun(
      tx,
      {
        org_id: principal.orgId,
        buyer_id: principal.buyerId,
        subject_type: 'capture_set',
        job_id: row.id,
        summary: `capture set of ${site.name} / ${epoch.label}, open`,
        jurisdiction: site.country,
        policy_id: policyId(policy),
        trust_tier: 'public',
        work_type: 'capture_set',
      },
      [
        {
          type: 'capture_set.created',
          summary: `capture set created by ${principal.buyerId}: ${row.total_files} files, ${row.raw_bytes} bytes`,
          metadata: {
            site_id: site.id,
            epoch_id: epoch.id,
            manifest_version: version,
            manifest_sha256: policy.manifest_sha256,
            total_files: row.total_files,
            raw_bytes: row.raw_bytes,
          },
        },
      ],
    );
    return row;
  });
  return response(ctx.db, principal, set);
}

export async function getCaptureSet(ctx: PlatformServices, principal: Principal, id: string) {
  const set = await store.findCaptureSet(ctx.db, principal.orgId, id);
  if (!set) throw notFound('capture set', id);
  return response(ctx.db, principal, set);
}

export async function listCaptureSets(
  ctx: PlatformServices,
  principal: Principal,
  epochId: string,
  page: { limit?: number | undefined; offset?: number | undefined },
) {
  const { epoch, site } = await epochWithSite(ctx.db, principal, epochId);
  const sets = await store.listCaptureSets(ctx.db, epoch.id, { limit: page.limit ?? 100, offset: page.offset ?? 0 });
  return { capture_sets: sets.map(captureSetView), epoch: epochView(epoch), site: siteView(site) };
}

/** Throws 409 naming both states unless the set may move from `from` to `to`. */
function assertMove(from: CaptureStatus, to: CaptureStatus): void {
  const why = refusal(from, to);
  if (why) throw new ApiError('conflict', why);
}

/** `complete` is the move uploading -> ready only (processing -> ready belongs to a job's end). */
function assertCompletable(from: CaptureStatus): void {
  assertMove(from, 'ready');
  if (from !== 'uploading')
    throw new ApiError(
      'conflict',
      `a capture set is completed from uploading, and this one is ${from}: it cannot move from ${from} to ready by complete`,
    );
}

/**
 * POST /capture-sets/{id}/complete: every stored file is checked (size, then SHA-256 over a
 * stream) and the set moves uploading -> ready, or -> failed naming the files that differ.
 * `status: "failed"` abandons the set instead.
 */
export async function completeCaptureSet(
  ctx: PlatformServices,
  principal: Principal,
  id: string,
  body: Static<typeof CaptureSetCompleteRequest>,
) {
  const set = await store.findCaptureSet(ctx.db, principal.orgId, id);
  if (!set) throw notFound('capture set', id);
  const target = body.status ?? 'ready';
  if (target === 'failed')
    return failCaptureSet(ctx, principal, id, 'abandoned by the client (complete with status failed)');
  if (target !== 'ready') assertMove(set.status, target);
  const stored = JSON.parse(set.manifest_json) as CaptureManifest;
  if (body.manifest !== undefined) {
    const sent = manifestOf(body.manifest, '/manifest');
    if (canonicalJson(sent.files) !== canonicalJson(stored.files))
      throw new ApiError(
        'conflict',
        'the manifest sent with complete differs from the one the capture set was created with',
      );
  }
  checkTotals(stored, body);
  if (stored.files.length === 0)
    throw new ApiError(
      'conflict',
      'the capture set has no files in its manifest: create it with a manifest listing the files to upload',
    );
  assertCompletable(set.status);
  const files = await store.filesOf(ctx.db, set.id);
  const checks = await checkFiles(ctx.objects, files);
  const reason = mismatchReason(checks, new Map(files.map((f) => [f.path, f])));
  const after = await ctx.db.transaction(async (tx) => {
    const locked = await store.lockCaptureSet(tx, principal.orgId, id);
    if (!locked) throw notFound('capture set', id);
    // Another request may have completed or failed the set while the files were being read.
    assertCompletable(locked.status);
    await store.setVerification(tx, set.id, checks);
    const verified = checks.filter((c) => c.verification === 'verified');
    const events = verified.map((c) => ({
      type: 'capture_set.file_verified',
      summary: `${c.path}: ${c.bytes_received} bytes, SHA-256 matches the manifest`,
      metadata: { path: c.path, bytes: c.bytes_received, sha256: c.actual_sha256 },
    }));
    if (reason) {
      await store.moveCaptureSet(tx, set.id, statesBefore('failed'), 'failed', {
        failure_reason: reason,
        completed: true,
      });
      await closeRun(
        tx,
        ctx.secrets,
        set.id,
        [
          ...events,
          {
            type: 'capture_set.failed',
            summary: reason,
            metadata: {
              files: checks
                .filter((c) => c.verification !== 'verified')
                .map((c) => ({ path: c.path, verification: c.verification })),
            },
          },
        ],
        'capture set, failed',
      );
    } else {
      await store.moveCaptureSet(tx, set.id, ['uploading'], 'ready', { completed: true });
      await recordEvents(tx, set.id, [
        ...events,
        {
          type: 'capture_set.completed',
          summary: `all ${checks.length} files verified; the capture set is ready`,
          metadata: { total_files: checks.length, raw_bytes: set.raw_bytes },
          causedBy: ['capture_set.created'],
        },
      ]);
    }
    return (await store.findCaptureSet(tx, principal.orgId, id)) as store.CaptureSetRow;
  });
  return response(ctx.db, principal, after);
}

/** Moves a set to failed from any non-terminal state, with its reason; 409 from verified or failed. */
export async function failCaptureSet(ctx: PlatformServices, principal: Principal, id: string, reason: string) {
  const after = await ctx.db.transaction(async (tx) => {
    const locked = await store.lockCaptureSet(tx, principal.orgId, id);
    if (!locked) throw notFound('capture set', id);
    assertMove(locked.status, 'failed');
    await store.moveCaptureSet(tx, id, statesBefore('failed'), 'failed', { failure_reason: reason });
    await closeRun(
      tx,
      ctx.secrets,
      id,
      [{ type: 'capture_set.failed', summary: reason, metadata: { from: locked.status } }],
      'capture set, failed',
    );
    return (await store.findCaptureSet(tx, principal.orgId, id)) as store.CaptureSetRow;
  });
  return response(ctx.db, principal, after);
}

/** The set an upload request is for: the caller's (404 otherwise), still taking uploads (409 otherwise). */
export async function uploadTarget(
  ctx: PlatformServices,
  principal: Principal,
  id: string,
): Promise<store.CaptureSetRow> {
  const set = await store.findCaptureSet(ctx.db, principal.orgId, id);
  if (!set) throw notFound('capture set', id);
  if (set.status !== 'pending_upload' && set.status !== 'uploading')
    throw new ApiError(
      'conflict',
      `the capture set is ${set.status}: it takes uploads only while pending_upload or uploading`,
    );
  return set;
}

/**
 * A new tus upload for one manifest file: the path must be in the manifest and the declared
 * length equal the manifest's size. A second upload for the same path replaces the first
 * (returned, so its bytes can be removed).
 */
export async function beginUpload(
  ctx: PlatformServices,
  set: store.CaptureSetRow,
  upload: { id: string; path: string | undefined; size: number | undefined },
): Promise<{ replaced: string | null }> {
  if (!upload.path)
    throw new ApiError(
      'invalid_request',
      'Upload-Metadata must carry the manifest path of the file: path <base64 of the path>',
    );
  const files = await store.filesOf(ctx.db, set.id);
  const file = files.find((f) => f.path === upload.path);
  if (!file)
    throw new ApiError('invalid_request', `${JSON.stringify(upload.path)} is not a path in the capture set's manifest`);
  if (upload.size === undefined)
    throw new ApiError(
      'invalid_request',
      `Upload-Length is required (deferred lengths are not accepted): the manifest says ${file.bytes} bytes for ${file.path}`,
    );
  if (upload.size !== file.bytes)
    throw new ApiError(
      'invalid_request',
      `Upload-Length ${upload.size} differs from the manifest's ${file.bytes} bytes for ${file.path}`,
    );
  await store.setBytesReceived(ctx.db, set.id, file.path, 0, upload.id);
  // An empty file has no first byte: its creation is the start of the upload.
  if (file.bytes === 0) await markUploading(ctx, set.id);
  return { replaced: file.upload_id && file.upload_id !== upload.id ? file.upload_id : null };
}

/** pending_upload -> uploading, on the first byte of any file (a no-op once uploading). */
export async function markUploading(ctx: PlatformServices, setId: string): Promise<void> {
  await ctx.db.transaction(async (tx) => {
    if (await store.moveCaptureSet(tx, setId, ['pending_upload'], 'uploading')) {
      await recordEvents(tx, setId, [
        { type: 'capture_set.uploading', summary: 'the first bytes arrived', metadata: {} },
      ]);
    }
  });
}

/** Progress of one upload, as the tus server reports it. */
export async function recordProgress(
  ctx: PlatformServices,
  setId: string,
  uploadId: string,
  offset: number,
): Promise<void> {
  await store.setProgressOfUpload(ctx.db, setId, uploadId, offset);
}

import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { PlatformServices } from '../../platform/services.js';
import { principalOf } from '../../platform/principal.js';
import {
  CaptureFile,
  CaptureSet,
  CaptureSetCompleteRequest,
  CaptureSetCreateRequest,
  CaptureSetListResponse,
  CaptureSetParams,
  CaptureSetResponse,
  EpochParams,
  Paging,
  Site,
  SiteCreateRequest,
  SiteDeleted,
  SiteEpoch,
  SiteEpochCreateRequest,
  SiteEpochList,
  SiteEpochParams,
  SiteList,
  SiteParams,
  SiteUpdateRequest,
} from './schemas.js';
import * as service from './service.js';
import { captureUploadRoutes } from './uploads.js';

const tags = ['capture sets'];
const read = { auth: { permission: 'capture_sets:read' as const } };
const write = { auth: { permission: 'capture_sets:write' as const } };

/** Sites, their epochs and capture sets (DESIGN.md section 14, docs/capture-sets.md). */
export async function captureRoutes(app: App, ctx: PlatformServices): Promise<void> {
  for (const schema of [Site, SiteEpoch, CaptureSet, CaptureFile, CaptureSetResponse]) app.addSchema(schema);

  app.post(
    '/api/v1/sites',
    {
      config: write,
      schema: { summary: 'Create a site', tags, body: SiteCreateRequest, response: { 201: Type.Ref(Site) } },
    },
    async (request, reply) => reply.code(201).send(await service.createSite(ctx, principalOf(request), request.body)),
  );
  app.get(
    '/api/v1/sites',
    {
      config: read,
      schema: {
        summary: "The organization's sites, newest first",
        tags,
        querystring: Paging,
        response: { 200: SiteList },
      },
    },
    async (request) => service.listSites(ctx, principalOf(request), request.query),
  );
  app.get(
    '/api/v1/sites/:id',
    { config: read, schema: { summary: 'One site', tags, params: SiteParams, response: { 200: Type.Ref(Site) } } },
    async (request) => service.getSite(ctx, principalOf(request), request.params.id),
  );
  app.patch(
    '/api/v1/sites/:id',
    {
      config: write,
      schema: {
        summary: "Change a site's fields (null clears an optional one)",
        tags,
        params: SiteParams,
        body: SiteUpdateRequest,
        response: { 200: Type.Ref(Site) },
      },
    },
    async (request) => service.updateSite(ctx, principalOf(request), request.params.id, request.body),
  );
  app.delete(
    '/api/v1/sites/:id',
    {
      config: write,
      schema: {
        summary: 'Delete a site and its epochs (409 while it has capture sets)',
        tags,
        params: SiteParams,
        response: { 200: SiteDeleted },
      },
    },
    async (request) => service.deleteSite(ctx, principalOf(request), request.params.id),
  );

  app.post(
    '/api/v1/sites/:site_id/epochs',
    {
      config: write,
      schema: {
        summary: 'Create an epoch (a capture of the site at a point in time)',
        tags,
        params: SiteEpochParams,
        body: SiteEpochCreateRequest,
        response: { 201: Type.Ref(SiteEpoch) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await service.createEpoch(ctx, principalOf(request), request.params.site_id, request.body)),
  );
  app.get(
    '/api/v1/sites/:site_id/epochs',
    {
      config: read,
      schema: {
        summary: "A site's epochs, newest first",
        tags,
        params: SiteEpochParams,
        response: { 200: SiteEpochList },
      },
    },
    async (request) => service.listEpochs(ctx, principalOf(request), request.params.site_id),
  );
  app.get(
    '/api/v1/epochs/:id',
    {
      config: read,
      schema: { summary: 'One epoch', tags, params: EpochParams, response: { 200: Type.Ref(SiteEpoch) } },
    },
    async (request) => service.getEpoch(ctx, principalOf(request), request.params.id),
  );
  app.get(
    '/api/v1/epochs/:id/capture-sets',
    {
      config: read,
      schema: {
        summary: "An epoch's capture sets, newest first",
        tags,
        params: EpochParams,
        querystring: Paging,
        response: { 200: CaptureSetListResponse },
      },
    },
    async (request) => service.listCaptureSets(ctx, principalOf(request), request.params.id, request.query),
  );

  app.post(
    '/api/v1/capture-sets',
    {
      config: write,
      schema: {
        summary: 'Create a capture set from its manifest (files are then uploaded through tus)',
        tags,
        body: CaptureSetCreateRequest,
        response: { 201: Type.Ref(CaptureSetResponse) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await service.createCaptureSet(ctx, principalOf(request), request.body)),
  );
  app.get(
    '/api/v1/capture-sets/:id',
    {
      config: read,
      schema: {
        summary: 'A capture set with its epoch, site and per-file progress',
        tags,
        params: CaptureSetParams,
        response: { 200: Type.Ref(CaptureSetResponse) },
      },
    },
    async (request) => service.getCaptureSet(ctx, principalOf(request), request.params.id),
  );
  app.post(
    '/api/v1/capture-sets/:id/complete',
    {
      config: write,
      schema: {
        summary:
          "Check every file's size and SHA-256 against the manifest: ready, or failed naming the files that differ",
        tags,
        params: CaptureSetParams,
        body: CaptureSetCompleteRequest,
        response: { 200: Type.Ref(CaptureSetResponse) },
      },
    },
    async (request) => service.completeCaptureSet(ctx, principalOf(request), request.params.id, request.body ?? {}),
  );
  await captureUploadRoutes(app, ctx);
}

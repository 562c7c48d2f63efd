import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { CLOSE_CONNECTION, filePartBytes } from '../../platform/multipart.js';
import { principalOf } from '../../platform/principal.js';
import { StringEnum } from '../../platform/schemas.js';
import { startIngestor, type Ingestor } from './ingest.js';
import {
  CreateKnowledgeBaseRequest,
  Deleted,
  DocParams,
  KbDocument,
  KbDocumentList,
  KbParams,
  KnowledgeBase,
  KnowledgeBaseList,
  Paging,
  SearchRequest,
  SearchResponse,
  UploadDocumentRequest,
} from './schemas.js';
import * as service from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** This instance's background ingestion (tests stop it as a crash would). */
    knowledgeIngestor: Ingestor;
  }
}

const tags = ['knowledge bases'];
const read = { auth: { permission: 'knowledge_bases:read' as const } };
const write = { auth: { permission: 'knowledge_bases:write' as const } };

async function readUpload(request: FastifyRequest, maxBytes: number): Promise<service.Upload> {
  if (!request.isMultipart()) {
    const body = request.body as { name: string; text: string; content_type?: string } | null | undefined;
    if (!body)
      throw new ApiError(
        'invalid_request',
        'send JSON {name, text} or multipart/form-data with the document in the field "file"',
        [{ path: '/', message: 'must be object' }],
      );
    return { name: body.name, bytes: Buffer.from(body.text, 'utf8'), declared: body.content_type };
  }
  const fields: Record<string, string> = {};
  let file: { bytes: Buffer; filename: string; mimetype: string } | undefined;
  try {
    for await (const part of request.parts({
      limits: { fileSize: maxBytes, files: 1, fields: 10, fieldSize: 4096, parts: 12 },
    })) {
      if (part.type === 'file') {
        const bytes = await filePartBytes(part);
        if (part.fieldname === 'file' && !file) file = { bytes, filename: part.filename, mimetype: part.mimetype };
      } else if (typeof part.value === 'string') {
        fields[part.fieldname] = part.value;
      }
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE')
      throw new ApiError(
        'payload_too_large',
        `the document is larger than ${maxBytes} bytes`,
        undefined,
        CLOSE_CONNECTION,
      );
    if (code === 'FST_FILES_LIMIT' || code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT')
      throw new ApiError('payload_too_large', 'too many parts in the form', undefined, CLOSE_CONNECTION);
    throw err;
  }
  if (!file)
    throw new ApiError('invalid_request', 'the form has no file: send the document in the field "file"', [
      { path: '/file', message: 'is required' },
    ]);
  const name = (fields.name ?? file.filename).trim();
  if (name === '' || name.length > 256)
    throw new ApiError('invalid_request', 'name (or the file name) must be 1 to 256 characters', [
      { path: '/name', message: 'must be 1 to 256 characters' },
    ]);
  const declared = fields.content_type ?? (file.mimetype === 'application/octet-stream' ? undefined : file.mimetype);
  return { name, bytes: file.bytes, declared };
}

/**
 * Knowledge bases (docs/knowledge-bases.md): the knowledge bases of an organization, their
 * documents (uploaded as JSON text or a multipart file, ingested in the background) and search.
 */
export async function knowledgeRoutes(app: App, ctx: ServiceContext): Promise<void> {
  // Resumed work waits until the server listens (an upload's kick starts it earlier).
  const ingestor = startIngestor(ctx, { deferred: true });
  app.decorate('knowledgeIngestor', ingestor);
  app.addHook('onListen', async () => {
    ingestor.start();
  });
  app.addHook('onClose', async () => {
    await ingestor.close();
  });
  if (!app.hasRequestDecorator('isMultipart')) await app.register(multipart);
  for (const schema of [KnowledgeBase, KbDocument]) app.addSchema(schema);
  const maxBytes = ctx.config.knowledge.maxDocumentBytes;

  app.post(
    '/api/v1/knowledge-bases',
    {
      config: write,
      schema: {
        summary: 'Create a knowledge base',
        tags,
        body: CreateKnowledgeBaseRequest,
        response: { 201: Type.Ref(KnowledgeBase) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await service.createKnowledgeBase(ctx, principalOf(request), request.body)),
  );

  app.get(
    '/api/v1/knowledge-bases',
    {
      config: read,
      schema: {
        summary: "The organization's knowledge bases, newest first",
        tags,
        querystring: Type.Object(Paging),
        response: { 200: KnowledgeBaseList },
      },
    },
    async (request) => service.listKnowledgeBases(ctx, principalOf(request), request.query),
  );

  app.get(
    '/api/v1/knowledge-bases/:id',
    {
      config: read,
      schema: { summary: 'One knowledge base', tags, params: KbParams, response: { 200: Type.Ref(KnowledgeBase) } },
    },
    async (request) => service.getKnowledgeBase(ctx, principalOf(request), request.params.id),
  );

  app.delete(
    '/api/v1/knowledge-bases/:id',
    {
      config: write,
      schema: {
        summary: 'Delete a knowledge base with its documents and chunks',
        tags,
        params: KbParams,
        response: { 200: Deleted },
      },
    },
    async (request) => service.deleteKnowledgeBase(ctx, principalOf(request), request.params.id),
  );

  app.post(
    '/api/v1/knowledge-bases/:id/documents',
    {
      config: { auth: { permission: 'documents:write' } },
      // JSON escapes can make a text longer on the wire; the document's own size is checked after.
      bodyLimit: maxBytes * 2 + 1024 * 1024,
      // JSON is validated; a form is read from the stream in the handler (platform/route-validation.ts).
      schema: {
        summary:
          'Upload a document: JSON {name, text} or multipart/form-data with `file` (plain text, Markdown, HTML, PDF); ingested in the background (202)',
        tags,
        consumes: ['application/json', 'multipart/form-data'],
        params: KbParams,
        body: UploadDocumentRequest,
        response: { 202: Type.Ref(KbDocument) },
      },
    },
    async (request, reply) => {
      const upload = await readUpload(request, maxBytes);
      const doc = await service.uploadDocument(ctx, principalOf(request), request.params.id, upload);
      ingestor.kick();
      return reply.code(202).send(doc);
    },
  );

  app.get(
    '/api/v1/knowledge-bases/:id/documents',
    {
      config: read,
      schema: {
        summary: "A knowledge base's documents, oldest first, with their ingestion status",
        tags,
        params: KbParams,
        querystring: Type.Object({
          ...Paging,
          status: Type.Optional(StringEnum(['processing', 'ready', 'failed'] as const)),
        }),
        response: { 200: KbDocumentList },
      },
    },
    async (request) => service.listDocuments(ctx, principalOf(request), request.params.id, request.query),
  );

  app.get(
    '/api/v1/knowledge-bases/:id/documents/:document_id',
    {
      config: read,
      schema: {
        summary: 'One document: status, phase and chunk counts while it is ingested',
        tags,
        params: DocParams,
        response: { 200: Type.Ref(KbDocument) },
      },
    },
    async (request) => service.getDocument(ctx, principalOf(request), request.params.id, request.params.document_id),
  );

  app.delete(
    '/api/v1/knowledge-bases/:id/documents/:document_id',
    {
      config: write,
      schema: { summary: 'Delete a document with its chunks', tags, params: DocParams, response: { 200: Deleted } },
    },
    async (request) => service.deleteDocument(ctx, principalOf(request), request.params.id, request.params.document_id),
  );

  app.post(
    '/api/v1/knowledge-bases/:id/search',
    {
      config: read,
      schema: {
        summary: 'The chunks nearest to a query, best first (the query is embedded on a node: billed and receipted)',
        tags,
        params: KbParams,
        body: SearchRequest,
        response: { 200: SearchResponse },
      },
    },
    async (request) => service.search(ctx, principalOf(request), request.params.id, request.body),
  );
}

import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { verifyBundle, type TrustedKey } from '@svc/protocol/verify';
import * as z from 'zod';
import type { App } from '../../app.js';
import { INNER_CALL_HEADER } from '../auth/hook.js';

/**
 * The MCP tools (DESIGN.md section 13). Each one calls its REST twin in-process
 * (`app.inject`) with the caller's own credential, so validation, scopes, tenancy, billing and
 * the error strings are exactly the REST API's: a `read-only` key that may not POST
 * /v1/chat/completions may not call `chat` either, and gets the same `insufficient_scope`.
 */

/** The caller's credential headers, forwarded to every REST twin. */
export type Credential = Record<string, string>;

interface Rest {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  json: unknown;
}

const CC = z
  .string()
  .regex(/^[A-Z]{2}$/)
  .describe('ISO 3166-1 alpha-2 country code, e.g. CA');
const SubjectId = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{1,256}$/)
  .describe('a job id (job_...) or a gateway completion id (chatcmpl-..., emb-...)');

function result(value: unknown, text?: string): CallToolResult {
  return {
    content: [{ type: 'text', text: text ?? JSON.stringify(value, null, 2) }],
    structuredContent: value as Record<string, unknown>,
  };
}

/** A REST error as an MCP tool error, with the same `error` string and message. */
function toolError(res: Rest): CallToolResult {
  const raw = (typeof res.json === 'object' && res.json !== null ? res.json : {}) as {
    error?: string | { message?: string; code?: string };
    message?: string;
    details?: unknown;
  };
  // A `/v1/` twin answers in OpenAI's envelope; MCP keeps the ErrorResponse fields (docs/errors.md).
  const body =
    typeof raw.error === 'object'
      ? { error: raw.error.code, message: raw.error.message, details: undefined }
      : { ...raw, error: raw.error };
  const error = body.error ?? 'internal';
  const message = body.message ?? `HTTP ${res.status}`;
  return {
    isError: true,
    content: [{ type: 'text', text: `${error}: ${message}` }],
    structuredContent: { code: res.status, error, message, ...(body.details ? { details: body.details } : {}) },
  };
}

/**
 * An MCP server for one request, bound to its caller. Stateless: built per HTTP request, so any
 * instance behind a load balancer answers any request.
 */
export function createMcpServer(app: App, credential: Credential, version: string): McpServer {
  const rest = async (method: 'GET' | 'POST', url: string, payload?: unknown): Promise<Rest> => {
    // The MCP request was counted against the rate limits already; its REST twin is not counted again.
    const headers = { ...credential, [INNER_CALL_HEADER]: app.innerCallMark };
    const res = await app.inject({
      method,
      url,
      headers: { ...headers, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(payload === undefined ? {} : { payload: JSON.stringify(payload) }),
    });
    let json: unknown;
    try {
      json = JSON.parse(res.body);
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, headers: res.headers, body: res.body, json };
  };
  const call = async (
    method: 'GET' | 'POST',
    url: string,
    payload?: unknown,
    shape?: (json: unknown, res: Rest) => unknown,
  ): Promise<CallToolResult> => {
    const res = await rest(method, url, payload);
    if (res.status >= 400) return toolError(res);
    return result(shape ? shape(res.json, res) : res.json);
  };
  const query = (params: Record<string, string | number | undefined>) => {
    const q = new URLSearchParams(
      Object.entries(params)
        .filter((e): e is [string, string | number] => e[1] !== undefined)
        .map(([k, v]): [string, string] => [k, String(v)]),
    );
    return q.size > 0 ? `?${q}` : '';
  };

  const server = new McpServer(
    { name: 'svc', title: 'SVC compute marketplace and inference gateway', version },
    {
      instructions:
        'Run inference on provider nodes pinned by country or TEE, submit batch jobs, and fetch signed receipts and evidence that verify offline. Prices are in CAD.',
    },
  );

  server.registerTool(
    'list_models',
    {
      title: 'List models',
      description:
        'The model catalogue: ids, types (chat, embeddings, transcription, image) and prices in CAD. Needs models:read.',
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    async () => call('GET', '/v1/models'),
  );

  server.registerTool(
    'chat',
    {
      title: 'Chat completion',
      description:
        'Runs a chat completion on a provider node and returns the answer, the node, its country and GPU, the usage and the id of the signed SVC1 receipt (fetch it with get_receipts, the evidence with get_evidence). Billed to your credits. Needs inference:write.',
      inputSchema: {
        model: z.string().describe('a chat model id from list_models, e.g. tinyllama'),
        messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string() })).min(1),
        max_tokens: z.number().int().min(1).max(32768).optional(),
        temperature: z.number().min(0).max(2).optional(),
        jurisdiction: CC.optional().describe(
          'preferred country of the serving node; another is used if none is available',
        ),
        strict_jurisdiction: CC.optional().describe(
          'the serving node MUST be in this country, else the call fails with no_capacity',
        ),
        requires_tee: z.boolean().optional().describe('only nodes with verified confidential-computing hardware'),
        knowledge_base: z.string().optional().describe('ground the answer in this knowledge base'),
      },
    },
    async (args) => {
      const res = await rest('POST', '/v1/chat/completions', args);
      if (res.status >= 400) return toolError(res);
      const c = res.json as {
        id: string;
        model: string;
        choices: { message: { content: string }; finish_reason: string }[];
        usage: unknown;
        svc_node?: { node_id: string; country: string | null; region: string | null; gpu_model: string | null };
      };
      const answer = c.choices[0]?.message.content ?? '';
      const out = {
        id: c.id,
        answer,
        finish_reason: c.choices[0]?.finish_reason ?? null,
        model: c.model,
        node_id: c.svc_node?.node_id ?? null,
        country: c.svc_node?.country ?? null,
        region: c.svc_node?.region ?? null,
        gpu_model: c.svc_node?.gpu_model ?? null,
        receipt_id: String(res.headers['x-svc-receipt'] ?? ''),
        usage: c.usage,
      };
      return result(
        out,
        `${answer}\n\n(served by ${out.node_id} in ${out.country ?? 'unknown'}; receipt ${out.receipt_id}; completion ${c.id})`,
      );
    },
  );

  server.registerTool(
    'embed',
    {
      title: 'Embeddings',
      description:
        'Embeds one text or several with an embeddings model (all-MiniLM-L6-v2: 384 dimensions). Returns the vectors, usage and the node. Needs inference:write.',
      inputSchema: {
        model: z.string().default('all-MiniLM-L6-v2'),
        input: z.union([z.string(), z.array(z.string()).min(1).max(2048)]),
        strict_jurisdiction: CC.optional(),
        jurisdiction: CC.optional(),
      },
    },
    async (args) =>
      call('POST', '/v1/embeddings', args, (json, res) => ({
        ...(json as object),
        receipt_id: res.headers['x-svc-receipt'] ?? null,
      })),
  );

  server.registerTool(
    'estimate_job',
    {
      title: 'Estimate a job',
      description:
        'Estimates the cost in CAD of a batch job of a kind (1 LLM inference, 2 embeddings, 3 transcription, 4 images, 5-10 compute; see GET /api/v1/marketplace/pricing). Needs jobs:read.',
      inputSchema: {
        kind: z.number().int().min(1).max(10),
        estimated_tokens: z.number().int().min(0).optional(),
        estimated_duration_ms: z.number().int().min(0).optional(),
        estimated_gpu_seconds: z.number().int().min(0).optional(),
        estimated_images: z.number().int().min(0).optional(),
        strict_jurisdiction: CC.optional(),
      },
      annotations: { readOnlyHint: true },
    },
    async (args) => call('POST', '/api/v1/marketplace/estimate', args),
  );

  server.registerTool(
    'submit_job',
    {
      title: 'Submit a job',
      description:
        'Submits a batch job; its budget is held until it ends and only the metered usage is charged. Text kinds take inline_text (one input per line); compute kinds take runner_args. Returns the job id. Needs jobs:write.',
      inputSchema: {
        kind: z.number().int().min(1).max(10),
        budget: z.number().positive().describe('CAD, whole cents'),
        max_price_per_unit: z.number().positive().describe('CAD per unit of the kind'),
        currency: z.literal('CAD').default('CAD'),
        model: z.string().optional(),
        inline_text: z.string().optional(),
        payload_url: z.string().url().optional(),
        runner_args: z.array(z.string()).optional(),
        strict_jurisdiction: CC.optional(),
        region: z.string().optional(),
        requires_tee: z.boolean().optional(),
      },
    },
    async (args) => call('POST', '/api/v1/marketplace/jobs', args),
  );

  server.registerTool(
    'get_job',
    {
      title: 'Get a job',
      description: 'One job: status, node, charge, attempts. Needs jobs:read.',
      inputSchema: { job_id: z.string().regex(/^job_[a-z0-9]{26}$/) },
      annotations: { readOnlyHint: true },
    },
    async ({ job_id }) => call('GET', `/api/v1/marketplace/jobs/${job_id}`),
  );

  server.registerTool(
    'list_jobs',
    {
      title: 'List jobs',
      description: 'Your jobs, newest first, optionally by status. Needs jobs:read.',
      inputSchema: {
        status: z.enum(['submitted', 'pending', 'assigned', 'running', 'completed', 'failed', 'cancelled']).optional(),
        limit: z.number().int().min(1).max(200).optional(),
        offset: z.number().int().min(0).optional(),
      },
      annotations: { readOnlyHint: true },
    },
    async (args) => call('GET', `/api/v1/marketplace/jobs${query(args)}`),
  );

  server.registerTool(
    'get_receipts',
    {
      title: 'Get receipts',
      description:
        'The node-signed SVC1 receipts of a job or gateway request, with audit metadata (model, node, GPU, country). Needs receipts:read.',
      inputSchema: { id: SubjectId },
      annotations: { readOnlyHint: true },
    },
    async ({ id }) => call('GET', `/api/v1/job/receipts/${encodeURIComponent(id)}`),
  );

  server.registerTool(
    'get_evidence',
    {
      title: 'Get evidence',
      description:
        'The evidence graph of a job or gateway request: events (policy, routing and why, receipts, ledger), edges and the platform certificate, verified when fetched. Needs evidence:read.',
      inputSchema: { id: SubjectId },
      annotations: { readOnlyHint: true },
    },
    async ({ id }) => call('GET', `/api/v1/jobs/${encodeURIComponent(id)}/evidence`),
  );

  server.registerTool(
    'verify_bundle',
    {
      title: 'Verify an evidence bundle',
      description:
        'Runs the offline verifier (the same code as `svc verify`) on a bundle: pass its JSON text, or the id of one of your jobs or requests to fetch it. Keys are pinned to the platform keys this server publishes unless public_keys are given. Returns every check with pass or fail and a reason. Needs evidence:read.',
      inputSchema: {
        bundle: z
          .string()
          .max(16 * 1024 * 1024)
          .optional()
          .describe('the bundle JSON text'),
        id: SubjectId.optional().describe('or a job or completion id whose bundle to fetch'),
        public_keys: z
          .array(z.string().regex(/^[0-9a-f]{64}$/))
          .optional()
          .describe('Ed25519 keys to trust instead of the published platform keys'),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ bundle, id, public_keys }) => {
      if ((bundle === undefined) === (id === undefined)) {
        return toolError({
          status: 400,
          headers: {},
          body: '',
          json: { error: 'invalid_request', message: 'give exactly one of bundle and id' },
        });
      }
      let text = bundle ?? '';
      if (id !== undefined) {
        const res = await rest('GET', `/api/v1/jobs/${encodeURIComponent(id)}/evidence/bundle`);
        if (res.status >= 400) return toolError(res);
        text = res.body;
      }
      let trustedKeys: TrustedKey[];
      if (public_keys) {
        trustedKeys = public_keys.map((public_key_hex) => ({ public_key_hex }));
      } else {
        trustedKeys = ((await rest('GET', '/api/v1/keys/platform')).json as { keys: TrustedKey[] }).keys;
      }
      const verified = await verifyBundle(text, { trustedKeys });
      const lines = verified.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'}  ${c.name}  ${c.reason}`).join('\n');
      return result(verified, `${verified.ok ? 'verified: every check passed' : 'NOT VERIFIED'}\n${lines}`);
    },
  );

  server.registerTool(
    'get_balance',
    {
      title: 'Get balance',
      description:
        "Your organization's credit balance, held amount and what is available, in cents and CAD. Needs billing:read.",
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    async () => call('GET', '/api/v1/billing/balance'),
  );

  const resource = (template: string, name: string, description: string, path: (id: string) => string) =>
    server.registerResource(
      name,
      new ResourceTemplate(template, { list: undefined }),
      { description, mimeType: 'application/json' },
      async (uri, vars) => {
        const id = String(vars.id);
        const res = await rest('GET', path(encodeURIComponent(id)));
        if (res.status >= 400)
          throw new Error(
            `${String((res.json as { error?: string } | undefined)?.error ?? res.status)}: ${String((res.json as { message?: string } | undefined)?.message ?? '')}`,
          );
        return { contents: [{ uri: uri.href, mimeType: 'application/json', text: res.body }] };
      },
    );
  resource(
    'svc://jobs/{id}/evidence-bundle',
    'evidence-bundle',
    'The verifier bundle (svc.evidence_bundle.v1) of a job or gateway request',
    (id) => `/api/v1/jobs/${id}/evidence/bundle`,
  );
  resource(
    'svc://jobs/{id}/receipts',
    'receipts',
    'The signed receipts of a job or gateway request',
    (id) => `/api/v1/job/receipts/${id}`,
  );
  return server;
}

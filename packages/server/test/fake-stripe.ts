import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local fake of the few Stripe endpoints the `stripe` provider calls (accounts, account links,
 * checkout sessions, transfers), reached by the official SDK through its host/port/protocol
 * options. It records every request (path, idempotency key, form fields) and honours idempotency
 * keys as Stripe does: a repeated key replays the first response and creates nothing.
 */
export interface RecordedRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  authorization: string | undefined;
  form: Record<string, string>;
}

export interface FakeStripe {
  /** `http://127.0.0.1:PORT`, for SVC_STRIPE_API_BASE. */
  url: string;
  requests: RecordedRequest[];
  /** Objects created (one per distinct idempotency key), by path. */
  created: Record<string, Record<string, unknown>[]>;
  /** The next request to `path` is answered with this status and Stripe error body. */
  failNext(path: string, status: number, message: string, type?: string): void;
  /** The next request to `path` gets no answer until `release()`; `arrived` resolves when it comes in. */
  holdNext(path: string): { arrived: Promise<void>; release: () => void };
  close(): Promise<void>;
}

export const FAKE_STRIPE_WEBHOOK_SECRET = 'whsec_test_fake_stripe_secret_0123456789';

/**
 * Signs a webhook payload exactly as Stripe does: `Stripe-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<payload>")>`.
 *
 * @example
 * const { body, signature } = signStripeEvent({ id: 'evt_1', type: 'account.updated', data: { object: account } });
 */
export function signStripeEvent(
  event: Record<string, unknown>,
  options: { secret?: string; timestamp?: number } = {},
): { body: string; signature: string } {
  const body = JSON.stringify({
    object: 'event',
    api_version: '2025-01-01',
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    ...event,
  });
  const t = options.timestamp ?? Math.floor(Date.now() / 1000);
  const v1 = createHmac('sha256', options.secret ?? FAKE_STRIPE_WEBHOOK_SECRET)
    .update(`${t}.${body}`)
    .digest('hex');
  return { body, signature: `t=${t},v1=${v1}` };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startFakeStripe(): Promise<FakeStripe> {
  const requests: RecordedRequest[] = [];
  const created: Record<string, Record<string, unknown>[]> = {};
  const byKey = new Map<string, { status: number; body: unknown }>();
  const failures = new Map<string, { status: number; message: string; type: string }>();
  const holds = new Map<string, { arrivedResolve: () => void; released: Promise<void> }>();
  let counter = 0;

  const make = (path: string, form: Record<string, string>): Record<string, unknown> => {
    counter += 1;
    switch (path) {
      case '/v1/accounts':
        return {
          id: `acct_fake${counter}`,
          object: 'account',
          type: form.type,
          email: form.email,
          country: form.country,
          details_submitted: false,
          payouts_enabled: false,
        };
      case '/v1/account_links':
        return {
          object: 'account_link',
          url: `https://connect.stripe.test/setup/e/${form.account}/${counter}`,
          created: 1,
          expires_at: 2,
        };
      case '/v1/checkout/sessions':
        return {
          id: `cs_test_fake${counter}`,
          object: 'checkout.session',
          url: `https://checkout.stripe.test/c/pay/cs_test_fake${counter}`,
          client_reference_id: form.client_reference_id,
          payment_status: 'unpaid',
        };
      case '/v1/transfers':
        return {
          id: `tr_fake${counter}`,
          object: 'transfer',
          amount: Number(form.amount),
          currency: form.currency,
          destination: form.destination,
        };
      default:
        return {};
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const form = Object.fromEntries(new URLSearchParams(await readBody(req)));
    const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
    requests.push({ method: req.method ?? '', path, idempotencyKey, authorization: req.headers.authorization, form });
    const hold = holds.get(path);
    if (hold) {
      holds.delete(path);
      hold.arrivedResolve();
      await hold.released;
    }
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake${counter}` });
      res.end(JSON.stringify(body));
    };
    const failure = failures.get(path);
    if (failure) {
      failures.delete(path);
      return send(failure.status, { error: { type: failure.type, message: failure.message } });
    }
    const replay = idempotencyKey ? byKey.get(`${path} ${idempotencyKey}`) : undefined;
    if (replay) return send(replay.status, replay.body);
    const object = make(path, form);
    (created[path] ??= []).push(object);
    if (idempotencyKey) byKey.set(`${path} ${idempotencyKey}`, { status: 200, body: object });
    send(200, object);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => {
      res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    created,
    failNext(path, status, message, type = 'invalid_request_error') {
      failures.set(path, { status, message, type });
    },
    holdNext(path) {
      let arrivedResolve = () => undefined as void;
      let release = () => undefined as void;
      const arrived = new Promise<void>((r) => (arrivedResolve = r));
      const released = new Promise<void>((r) => (release = r));
      holds.set(path, { arrivedResolve, released });
      return { arrived, release };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

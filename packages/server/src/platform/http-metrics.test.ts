import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../test/harness.js';

describe('GET /metrics', () => {
  let open: TestApp;
  let withToken: TestApp;
  const token = 'metrics-token-0123456789';
  beforeAll(async () => {
    open = await createTestApp();
    withToken = await createTestApp({ env: { SVC_METRICS_TOKEN: token } });
  });
  afterAll(async () => {
    await open.close();
    await withToken.close();
  });

  it('counts requests by route pattern and status, with a latency histogram and process metrics', async () => {
    await open.app.inject({ method: 'GET', url: '/api/v1/health' });
    await open.app.inject({ method: 'GET', url: '/api/v1/health' });
    await open.app.inject({ method: 'GET', url: '/no/such/route' });
    const res = await open.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.body).toMatch(/svc_http_requests_total\{method="GET",route="\/api\/v1\/health",status="200"\} 2/);
    expect(res.body).toMatch(/svc_http_requests_total\{method="GET",route="unmatched",status="404"\} 1/);
    expect(res.body).toContain(
      'svc_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/api/v1/health",status="200"}',
    );
    expect(res.body).toContain('svc_process_resident_memory_bytes');
  });

  it('refuses a non-loopback caller when no token is configured', async () => {
    const res = await open.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.9' });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('forbidden');
  });

  it('lets a remote caller in with the configured bearer token, and only with it', async () => {
    const denied = await withToken.app.inject({
      method: 'GET',
      url: '/metrics',
      remoteAddress: '203.0.113.9',
      headers: { authorization: 'Bearer wrong-token-0123456789' },
    });
    expect(denied.statusCode).toBe(401);
    const allowed = await withToken.app.inject({
      method: 'GET',
      url: '/metrics',
      remoteAddress: '203.0.113.9',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(allowed.statusCode).toBe(200);
    expect(allowed.body).toContain('svc_http_requests_total');
  });
});

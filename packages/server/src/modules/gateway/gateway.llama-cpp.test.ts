import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLlamaCppEngine, probeLlamaCpp, type Engine } from '@svc/node-agent';
import { createTinyGguf } from '@svc/node-agent/testing';
import { startGatewayFixture, type GatewayFixture, type GatewayNode } from '../../../test/gateway-fixture.js';

const probe = await probeLlamaCpp();
if (!probe.available) console.log(`[svc test] SKIPPED gateway tests on the llama-cpp engine: ${probe.reason}`);

describe.skipIf(!probe.available)(
  'the gateway on a node running the llama-cpp engine (generated tiny GGUF models)',
  () => {
    let dir: string;
    let engine: Engine;
    let f: GatewayFixture;
    let node: GatewayNode;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'svc-gw-gguf-'));
      const chat = await createTinyGguf({ path: join(dir, 'chat.gguf'), kind: 'chat' });
      const embedding = await createTinyGguf({ path: join(dir, 'embed.gguf'), kind: 'embedding' });
      engine = await createLlamaCppEngine({
        models: new Map([
          ['tinyllama', chat.path],
          ['all-MiniLM-L6-v2', embedding.path],
        ]),
        threads: 1,
        gpu: false,
      });
      f = await startGatewayFixture();
      node = await f.addNode({
        country: 'CA',
        engines: new Map([
          ['tinyllama', engine],
          ['all-MiniLM-L6-v2', engine],
        ]),
        concurrency: 1,
      });
    });
    afterAll(async () => {
      await f?.close();
      await engine?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('answers a chat completion, plain and streamed, counted by the model tokenizer and signed by the node', async () => {
      const client = f.openai();
      const plain = await client.chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 6,
        temperature: 0,
      });
      expect(plain.choices[0]?.message.content?.length).toBeGreaterThan(0);
      expect(plain.choices[0]?.finish_reason).toBe('length');
      expect(plain.usage?.completion_tokens).toBe(6);
      expect(plain.usage?.prompt_tokens).toBeGreaterThan('hello'.length);
      const receipts = (await f.api('GET', `/api/v1/job/receipts/${plain.id}`)).json.receipts as {
        metering_units: number;
        metadata: Record<string, unknown>;
      }[];
      expect(receipts[0]).toMatchObject({
        metering_units: plain.usage?.total_tokens,
        metadata: { engine: 'llama-cpp', node_id: node.nodeId },
      });

      const stream = await client.chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 6,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
      // Deterministic at temperature 0: the same text as the plain answer.
      expect(text).toBe(plain.choices[0]?.message.content);
      expect(chunks.at(-1)?.usage).toEqual(plain.usage);
    });

    it('holds its answer to a response_format json_schema with a grammar: even random weights answer JSON of the schema', async () => {
      const schema = {
        type: 'object',
        properties: {
          ok: { type: 'boolean' },
          colour: { enum: ['red', 'green', 'blue'] },
          tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 2 },
        },
        required: ['ok', 'colour', 'tags'],
        additionalProperties: false,
      };
      for (const seed of [1, 2]) {
        const answer = await f.openai().chat.completions.create({
          model: 'tinyllama',
          messages: [{ role: 'user', content: 'a colour please' }],
          response_format: { type: 'json_schema', json_schema: { name: 'pick', schema, strict: true } },
          max_tokens: 200,
          temperature: 1,
          seed,
        });
        const value = JSON.parse(answer.choices[0]?.message.content ?? '') as Record<string, unknown>;
        expect(Object.keys(value).sort()).toEqual(['colour', 'ok', 'tags']);
        expect(typeof value.ok).toBe('boolean');
        expect(['red', 'green', 'blue']).toContain(value.colour);
        expect(Array.isArray(value.tags) && value.tags.every((t) => t === 'a' || t === 'b')).toBe(true);
      }
      const object = await f.openai().chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'json' }],
        response_format: { type: 'json_object' },
        max_tokens: 300,
        temperature: 0,
        stop: ['}'],
      });
      // The grammar holds generation to JSON; the stop trigger ends it at the first '}' (not sent, as OpenAI).
      expect(object.choices[0]?.finish_reason).toBe('stop');
      expect(object.choices[0]?.message.content).not.toContain('}');
    });

    it('refuses the fields llama-cpp cannot honour with a 400 naming them', async () => {
      const tools = await f.api('POST', '/v1/chat/completions', {
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
      });
      expect(tools.status).toBe(400);
      expect(tools.json.error).toMatchObject({ param: 'tools', code: 'invalid_request' });
      const bias = await f.api('POST', '/v1/chat/completions', {
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'hi' }],
        logit_bias: { '42': 5 },
      });
      expect(bias.status).toBe(400);
      expect(bias.json.error).toMatchObject({ param: 'logit_bias' });
    });

    it('embeds in 384 dimensions', async () => {
      const res = await f
        .openai()
        .embeddings.create({ model: 'all-MiniLM-L6-v2', input: ['hello world', 'another text'] });
      expect(res.data.map((d) => d.embedding.length)).toEqual([384, 384]);
      expect(res.data[0]?.embedding).not.toEqual(res.data[1]?.embedding);
      expect(res.usage.prompt_tokens).toBeGreaterThanOrEqual('hello world'.length + 'another text'.length);
    });
  },
);

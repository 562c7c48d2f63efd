import { describe, expect, it } from 'vitest';
import {
  buyerRunner,
  chooseImage,
  networkGranted,
  NO_NETWORK,
  NO_RUNNER,
  type OciConfig,
  type RunContext,
} from '../src/index.js';
import { ociCapabilities } from '../src/agent.js';

const oci: OciConfig = {
  probe: { podman: 'podman', runtime: 'runc', rootless: false, userns: [], gpu: false },
  images: ['localhost/runner:1', 'localhost/other:2'],
  nodeLabel: 'node_test',
  maxMemoryMb: 1024,
  maxCpus: 2,
};
const ctx = (fields: Partial<RunContext>): RunContext => ({
  engines: new Map(),
  dataDir: '/nonexistent',
  allowProcessRunner: false,
  signal: new AbortController().signal,
  ...fields,
});

describe('where buyer code runs (DESIGN.md section 8)', () => {
  it('the oci runner when the node has it, the process runner only when allowed, else NO_RUNNER', () => {
    expect(buyerRunner({}, ctx({ oci }))).toMatchObject({ runner: 'oci', image: 'localhost/runner:1', network: false });
    expect(buyerRunner({}, ctx({ allowProcessRunner: true }))).toEqual({ runner: 'process' });
    expect(buyerRunner({ runner: 'process' }, ctx({ oci, allowProcessRunner: true }))).toEqual({ runner: 'process' });
    expect(buyerRunner({ runner: 'process' }, ctx({ oci }))).toMatchObject({ runner: 'oci' });
    expect(() => buyerRunner({}, ctx({}))).toThrow(NO_RUNNER);
  });

  it("the image: the job's when held, else the first loaded, else the platform's default_runner_image", () => {
    expect(chooseImage({ image: 'localhost/other:2' }, oci)).toBe('localhost/other:2');
    expect(chooseImage({ image: 'other:2' }, oci)).toBe('localhost/other:2');
    expect(chooseImage({}, oci)).toBe('localhost/runner:1');
    expect(chooseImage({}, { ...oci, images: [], defaultImage: 'localhost/platform:1' })).toBe('localhost/platform:1');
    expect(() => chooseImage({ image: 'localhost/missing:1' }, oci)).toThrow(
      /image localhost\/missing:1 is not on this node/,
    );
  });

  it('network: none by default; egress only on a node whose operator allows it, declared as network:egress', () => {
    expect(networkGranted({}, oci)).toBe(false);
    expect(networkGranted({ network: 'none' }, { ...oci, allowNetwork: true })).toBe(false);
    expect(networkGranted({ network: 'egress' }, { ...oci, allowNetwork: true })).toBe(true);
    expect(() => networkGranted({ network: 'egress' }, oci)).toThrow(NO_NETWORK);
    expect(() => networkGranted({ network: 'bridge' }, { ...oci, allowNetwork: true })).toThrow(
      "payload.network must be 'none' or 'egress'",
    );
    expect(ociCapabilities(oci)).not.toContain('network:egress');
    expect(ociCapabilities({ ...oci, allowNetwork: true })).toContain('network:egress');
  });
});

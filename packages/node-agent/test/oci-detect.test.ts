import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cdiGpuReady, detectOciRunner } from '../src/runners/oci-detect.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function cdiDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-cdi-'));
  dirs.push(dir);
  await mkdir(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

// What `nvidia-ctk cdi generate` writes, cut down to the fields the detector reads.
const NVIDIA_YAML = `---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
`;

describe('CDI GPU detection (managed_oci_gpu_ready)', () => {
  it('is ready only when a spec declares nvidia.com/gpu', async () => {
    const none = await cdiDir({});
    const other = await cdiDir({ 'vendor.json': JSON.stringify({ cdiVersion: '0.5.0', kind: 'example.com/fpga' }) });
    const yaml = await cdiDir({ 'nvidia.yaml': NVIDIA_YAML });
    const json = await cdiDir({ 'nvidia.json': JSON.stringify({ cdiVersion: '0.5.0', kind: 'nvidia.com/gpu' }) });
    const noCtk = { nvidiaCtk: '/nonexistent/nvidia-ctk' };
    expect((await cdiGpuReady({ ...noCtk, cdiDirs: [none] })).ready).toBe(false);
    expect((await cdiGpuReady({ ...noCtk, cdiDirs: [other] })).ready).toBe(false);
    expect(await cdiGpuReady({ ...noCtk, cdiDirs: [none, yaml] })).toEqual({
      ready: true,
      reason: `CDI spec ${join(yaml, 'nvidia.yaml')} declares nvidia.com/gpu`,
    });
    expect((await cdiGpuReady({ ...noCtk, cdiDirs: [json] })).ready).toBe(true);
  });

  it('the probe reports the GPU and says why podman is unusable when it is absent', async () => {
    const yaml = await cdiDir({ 'nvidia.yaml': NVIDIA_YAML });
    const probe = await detectOciRunner({
      podman: '/nonexistent/podman',
      cdiDirs: [yaml],
      nvidiaCtk: '/nonexistent/x',
    });
    expect(probe.available).toBe(false);
    expect(probe.reasons[0]).toMatch(/^\/nonexistent\/podman info failed/);
  });
});

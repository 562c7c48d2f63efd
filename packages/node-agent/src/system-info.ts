import { readdir, readFile } from 'node:fs/promises';
import { availableParallelism, totalmem } from 'node:os';
import { join } from 'node:path';

/** The hardware a node declares when it registers. */
export interface SystemInfo {
  cpu_cores: number;
  ram_bytes: number;
  /** The first NVIDIA GPU's model, when the driver exposes one; absent on CPU-only nodes. */
  gpu_model?: string;
}

const NVIDIA_GPUS = '/proc/driver/nvidia/gpus';

/**
 * CPU cores and RAM from node:os, and the GPU model from the NVIDIA driver's
 * `/proc/driver/nvidia/gpus/<bus>/information` when present (no process is started). `gpuDir`
 * exists for tests.
 *
 * @example
 * const info = await readSystemInfo(); // { cpu_cores: 16, ram_bytes: 68719476736, gpu_model: 'NVIDIA L4' }
 */
export async function readSystemInfo(gpuDir = NVIDIA_GPUS): Promise<SystemInfo> {
  const info: SystemInfo = { cpu_cores: availableParallelism(), ram_bytes: totalmem() };
  const gpu = await readNvidiaModel(gpuDir);
  return gpu === undefined ? info : { ...info, gpu_model: gpu };
}

async function readNvidiaModel(dir: string): Promise<string | undefined> {
  try {
    for (const bus of (await readdir(dir)).sort()) {
      const text = await readFile(join(dir, bus, 'information'), 'utf8');
      const model = /^Model:\s*(.+)$/m.exec(text)?.[1]?.trim();
      if (model) return model.startsWith('NVIDIA') ? model : `NVIDIA ${model}`;
    }
  } catch {
    // No NVIDIA driver: a CPU node (other GPUs are declared by the operator, not detected).
  }
  return undefined;
}

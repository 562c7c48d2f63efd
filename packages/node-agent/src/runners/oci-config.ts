import type { OciRunnerProbe } from './oci-detect.js';

/** The node's `oci` runner: how podman runs here, the images it holds and the operator's ceilings. */
export interface OciConfig {
  probe: Pick<OciRunnerProbe, 'podman' | 'runtime' | 'rootless' | 'userns' | 'gpu'>;
  /** Image references the node holds; the first is its default. */
  images: string[];
  /** The image used when the node holds none the job names and loaded none (`ConfigResponse.default_runner_image`). */
  defaultImage?: string;
  /** Containers are labelled `svc.node=<nodeLabel>`, so leftovers of this node can be found and removed. */
  nodeLabel: string;
  /** The operator's ceilings (`svc node --max-memory`, `--max-cpus`): a job asks within them. */
  maxMemoryMb: number;
  maxCpus: number;
  /**
   * The operator grants network egress to jobs asking for it (`svc node --allow-job-network`,
   * capability `network:egress`); without it every container has no network.
   */
  allowNetwork?: boolean;
}

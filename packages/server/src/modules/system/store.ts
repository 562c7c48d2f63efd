import type { Queryable } from '../../platform/db/index.js';

export interface NodeCounts {
  registered: number;
  online5m: number;
  chatModelsLive: string[];
}

/** Node counts for the inference health report. */
export async function countNodes(db: Queryable, liveWindowSeconds: number): Promise<NodeCounts> {
  const { rows } = await db.query<{ registered: number; online5m: number }>(
    `SELECT count(*)::int AS registered,
            count(*) FILTER (WHERE last_seen > now() - interval '5 minutes')::int AS "online5m"
       FROM nodes`,
  );
  const live = await db.query<{ model: string }>(
    `SELECT DISTINCT unnest(models) AS model FROM nodes WHERE last_seen > now() - make_interval(secs => $1)`,
    [liveWindowSeconds],
  );
  return {
    registered: rows[0]?.registered ?? 0,
    online5m: rows[0]?.online5m ?? 0,
    chatModelsLive: live.rows.map((r) => r.model),
  };
}

/** True when the store answers `SELECT 1` within `timeoutMs`. */
export async function pingStore(db: Queryable, timeoutMs = 1000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const ping = db.query('SELECT 1').then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([ping, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

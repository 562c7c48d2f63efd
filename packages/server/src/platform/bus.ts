import type { Db } from './db/index.js';

/**
 * Messages between server instances: "a job became eligible", "work was cancelled". Over
 * PostgreSQL's LISTEN/NOTIFY, so every instance sharing the database hears every message (PGlite
 * delivers them within its one process). Payloads are short strings (ids).
 */
export interface Bus {
  publish(topic: BusTopic, payload: string): Promise<void>;
  subscribe(topic: BusTopic, handler: (payload: string) => void): Promise<() => Promise<void>>;
}

/**
 * `gateway` carries streamed chat events between instances (JSON, under 8000 bytes); `credit`
 * asks instances to give back an organization's unused credit reservation (billing/reservations.ts).
 */
export type BusTopic = 'jobs' | 'nodes' | 'work' | 'keys' | 'gateway' | 'uploads' | 'credit';

/** @example const bus = createDbBus(db); await bus.publish('jobs', jobId); */
export function createDbBus(db: Db): Bus {
  return {
    publish: (topic, payload) => db.notify(`svc_${topic}`, payload),
    subscribe: (topic, handler) => db.listen(`svc_${topic}`, handler),
  };
}

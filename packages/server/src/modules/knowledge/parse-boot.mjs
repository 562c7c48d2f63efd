// Starts a parse worker thread. The server runs its TypeScript sources through tsx, whose loader
// a worker thread does not inherit: register it here before importing the worker's module.
import { workerData } from 'node:worker_threads';

if (workerData.entry.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(workerData.entry);

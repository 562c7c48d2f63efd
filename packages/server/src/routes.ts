import type { App } from './app.js';
import type { ServiceContext } from './context.js';
import { systemRoutes } from './modules/system/routes.js';

/** Every route of the API is registered here, one line per resource family. */
export async function registerRoutes(app: App, ctx: ServiceContext): Promise<void> {
  await systemRoutes(app, ctx);
}

import type { App } from './app.js';
import type { ServiceContext } from './service-context.js';
import { attestationRoutes } from './modules/attestation/routes.js';
import { authRoutes } from './modules/auth/routes.js';
import { billingRoutes } from './modules/billing/routes.js';
import { captureRoutes } from './modules/capture/routes.js';
import { dashboardRoutes } from './modules/dashboard/routes.js';
import { evidenceRoutes } from './modules/evidence/routes.js';
import { gatewayRoutes } from './modules/gateway/routes.js';
import { jobRoutes } from './modules/jobs/routes.js';
import { mcpRoutes } from './modules/mcp/routes.js';
import { keyRoutes } from './modules/keys/routes.js';
import { knowledgeRoutes } from './modules/knowledge/routes.js';
import { logRoutes } from './modules/log/routes.js';
import { nodeRoutes } from './modules/nodes/routes.js';
import { objectRoutes } from './modules/objects/routes.js';
import { receiptRoutes } from './modules/receipts/routes.js';
import { payoutRoutes } from './modules/payouts/routes.js';
import { organizationRoutes } from './modules/organizations/routes.js';
import { systemRoutes } from './modules/system/routes.js';
import { workOrderRoutes } from './modules/work-orders/routes.js';
import { channelRoutes } from './modules/work/channel-routes.js';
import { workRoutes } from './modules/work/routes.js';

/** Every route of the API is registered here, one line per resource family. */
export async function registerRoutes(app: App, ctx: ServiceContext): Promise<void> {
  await systemRoutes(app, ctx);
  await authRoutes(app, ctx);
  await keyRoutes(app, ctx);
  await organizationRoutes(app, ctx);
  await nodeRoutes(app, ctx);
  await workRoutes(app, ctx);
  await attestationRoutes(app, ctx);
  await channelRoutes(app, ctx);
  await jobRoutes(app, ctx);
  await receiptRoutes(app, ctx);
  await evidenceRoutes(app, ctx);
  await logRoutes(app, ctx);
  await billingRoutes(app, ctx);
  await payoutRoutes(app, ctx);
  await gatewayRoutes(app, ctx);
  await knowledgeRoutes(app, ctx);
  await dashboardRoutes(app, ctx);
  await mcpRoutes(app, ctx);
  await workOrderRoutes(app, ctx);
  await captureRoutes(app, ctx);
  await objectRoutes(app, ctx);
}

import type { ServiceContext } from '../../service-context.js';
import type { Principal } from '../../platform/principal.js';
import type { ChatCall } from './chat.js';

/**
 * What the gateway asks of the module that grounds a chat in a knowledge base (`knowledge_base`
 * in the request): modules/knowledge implements it (`groundChat` in knowledge/retrieval.ts, which
 * runs its embeddings through the gateway) and `context.ts` registers it at start-up as
 * `ctx.grounding`, so that the gateway does not import knowledge.
 *
 * @example
 * const call = await ctx.grounding.groundChat(ctx, principal, prepareChat(body));
 */
export interface ChatGrounding {
  /** The call unchanged when it names no knowledge base; else with the sources in its context. */
  groundChat(ctx: ServiceContext, principal: Principal, call: ChatCall): Promise<ChatCall>;
}

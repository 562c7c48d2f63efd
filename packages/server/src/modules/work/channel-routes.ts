import websocket from '@fastify/websocket';
import { NODE_CHANNEL_MAX_MESSAGE_BYTES, NODE_CHANNEL_PATH } from '@svc/protocol';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../context.js';
import { ApiError } from '../../platform/errors.js';
import { nodeOf } from '../nodes/node-auth.js';
import { CHANNEL_LOSS_GRACE_SECONDS, channelLost, openChannel } from './channel.js';

/**
 * `GET /api/v1/node/channel`: the node channel (docs/node-protocol.md). The request is signed
 * like every node call (empty body), checked by the auth hook before the upgrade: a refused
 * handshake is an ordinary HTTP 401. A plain GET without the upgrade is a 400.
 */
export async function channelRoutes(app: App, ctx: ServiceContext): Promise<void> {
  // The channels this instance closes as it shuts down are not nodes lost: their work stays leased
  // (the node reconnects to another instance, or to this one restarted). Added before the plugin's
  // own preClose, which closes the sockets, so it runs first.
  let stopping = false;
  app.addHook('preClose', (done) => {
    stopping = true;
    done();
  });
  await app.register(websocket, { options: { maxPayload: NODE_CHANNEL_MAX_MESSAGE_BYTES } });
  app.route({
    method: 'GET',
    url: NODE_CHANNEL_PATH,
    config: { auth: { node: true } },
    schema: {
      summary: 'The node channel: a signed request (empty body) that upgrades to a WebSocket',
      tags: ['nodes'],
    },
    handler: async () => {
      throw new ApiError(
        'invalid_request',
        `${NODE_CHANNEL_PATH} is a WebSocket: send the signed request with "Connection: Upgrade" and "Upgrade: websocket"`,
      );
    },
    wsHandler: (socket, request) => {
      const node = nodeOf(request);
      ctx.log.info({ node_id: node.id }, 'node channel opened');
      const connection = openChannel(ctx, node, socket);
      socket.on('message', (data: Buffer, isBinary: boolean) =>
        connection.receive(isBinary ? '' : data.toString('utf8')),
      );
      socket.on('close', (code: number) => {
        connection.close();
        ctx.log.info({ node_id: node.id, code }, 'node channel closed');
        if (stopping) return;
        channelLost(ctx, node.id).then(
          (shortened) => {
            if (shortened > 0)
              ctx.log.warn(
                { node_id: node.id, work: shortened },
                `node channel lost: its gateway work fails over unless it reconnects within ${CHANNEL_LOSS_GRACE_SECONDS} s`,
              );
          },
          (err: unknown) => ctx.log.error({ err, node_id: node.id }, 'could not shorten the leases of a lost channel'),
        );
      });
      socket.on('error', () => connection.close());
    },
  });
}

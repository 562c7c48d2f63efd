import websocket from '@fastify/websocket';
import { NODE_CHANNEL_MAX_MESSAGE_BYTES, NODE_CHANNEL_PATH, hop } from '@svc/protocol';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { nodeOf } from '../nodes/node-auth.js';
import { touchNode } from '../nodes/store.js';
import { openChannel } from './channel.js';
import { channelLost } from './node-loss.js';

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
  /** This instance's open channels per node: a node may briefly hold two (a reconnect, a test's). */
  const open = new Map<string, number>();
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
      open.set(node.id, (open.get(node.id) ?? 0) + 1);
      // Live again at once, in the store too (a dropped channel marked it unreachable; the
      // handshake's own record of the call is skipped when another came within the second).
      void touchNode(ctx.db, node.id).catch((err: unknown) =>
        ctx.log.warn({ err, node_id: node.id }, 'could not record a node channel opening'),
      );
      const connection = openChannel(ctx, node, socket);
      // A node whose network went silent sends no close: without an answer to the last ping by
      // the next one, the channel is dropped like a closed one (below). Any message counts too.
      let heardAt = Date.now();
      let answered = true;
      const heard = () => {
        answered = true;
        heardAt = Date.now();
      };
      socket.on('pong', heard);
      socket.on('message', heard);
      const pinger = setInterval(() => {
        if (!answered) {
          ctx.log.warn({ node_id: node.id }, 'node channel dropped: no answer to a ping');
          socket.terminate();
          return;
        }
        answered = false;
        socket.ping();
      }, ctx.config.nodeChannelPingMs);
      pinger.unref();
      socket.on('message', (data: Buffer, isBinary: boolean) => {
        hop('work.received');
        connection.receive(isBinary ? '' : data.toString('utf8'));
      });
      socket.on('close', (code: number) => {
        clearInterval(pinger);
        connection.close();
        ctx.log.info({ node_id: node.id, code }, 'node channel closed');
        const left = (open.get(node.id) ?? 1) - 1;
        if (left > 0) open.set(node.id, left);
        else open.delete(node.id);
        // Another channel of the node is open here, or this instance is closing them all.
        if (left > 0 || stopping) return;
        channelLost(ctx, node.id, heardAt).then(
          (shortened) => {
            if (shortened !== undefined)
              ctx.log.warn(
                { node_id: node.id, work: shortened },
                `node channel lost: not routed to until it reconnects; the work leased straight to it fails over unless it does within ${ctx.config.channelLossGraceMs} ms`,
              );
          },
          (err: unknown) => ctx.log.error({ err, node_id: node.id }, 'could not mark a lost node channel'),
        );
      });
      socket.on('error', () => connection.close());
    },
  });
}

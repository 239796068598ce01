/**
 * Closing the sockets that hold no request, so a shutdown cannot wait minutes on them.
 *
 * Node's `server.close()` (fastify's `close()`) resolves only when every connection has ended.
 * fastify closes the idle keep-alive ones, but Node does not count as idle a socket that has not
 * yet sent a whole request: a browser's preconnected socket (a console tab left open) or a
 * half-sent request. Such a socket held `playflow dev`'s Ctrl-C for about three minutes. Sockets
 * whose request is in progress are left alone: their response finishes as before.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionTracker {
  /** Destroys every socket with no request in progress (call repeatedly while closing). */
  closeUnused(): void;
}

export function trackConnections(server: Server): ConnectionTracker {
  const sockets = new Map<Socket, number>(); // socket → requests in progress
  server.on('connection', (socket: Socket) => {
    sockets.set(socket, 0);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    sockets.set(socket, (sockets.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const n = sockets.get(socket);
      if (n !== undefined) sockets.set(socket, n - 1);
    });
  });
  return {
    closeUnused() {
      for (const [socket, busy] of sockets) if (busy <= 0) socket.destroy();
    },
  };
}

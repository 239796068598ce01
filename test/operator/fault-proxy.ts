/**
 * A transparent HTTP proxy between the operator and the Playflow server, so tests can make the
 * server "unreachable" (connections reset) or make single endpoints fail (e.g. 503 on
 * /api/queue/stats) without stopping the real server.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export class FaultProxy {
  private readonly server: http.Server;
  url = '';
  /** Reset every connection (server unreachable). */
  down = false;
  /**
   * Paths (prefix match) answered with `status` instead of being forwarded. Each answer's message
   * is numbered, as real failures differ (a request id, a timeout here and a refusal there).
   */
  failing = new Map<string, number>();
  private failures = 0;
  /** Requests forwarded or failed, in order: "METHOD path status". */
  readonly log: string[] = [];
  /** The same requests with their user agent (the operator sends playflow-operator/<identity>). */
  readonly requests: Array<{ method: string; path: string; userAgent: string }> = [];

  constructor(private readonly target: string) {
    this.server = http.createServer((req, res) => {
      const path = req.url ?? '/';
      this.requests.push({ method: req.method ?? 'GET', path, userAgent: String(req.headers['user-agent'] ?? '') });
      if (this.down) {
        this.log.push(`${req.method} ${path} reset`);
        req.socket.destroy();
        return;
      }
      for (const [prefix, status] of this.failing) {
        if (path.startsWith(prefix)) {
          this.log.push(`${req.method} ${path} ${status}`);
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: 'unavailable', message: `injected by the test proxy (failure ${++this.failures})` } }));
          return;
        }
      }
      const url = new URL(path, this.target);
      const upstream = http.request(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (up) => {
        this.log.push(`${req.method} ${path} ${up.statusCode}`);
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      upstream.on('error', () => {
        this.log.push(`${req.method} ${path} upstream-error`);
        req.socket.destroy();
      });
      req.pipe(upstream);
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

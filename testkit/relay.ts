/**
 * A TCP relay to a service that a test can cut: refused connections and dropped sessions, as when
 * the service goes away (PostgreSQL, Redis, Temporal's frontend), and restore on the same port —
 * without touching the shared service other tests use.
 */
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

export interface CuttableRelay {
  /** The relay's port on 127.0.0.1 (the same after a restore). */
  readonly port: number;
  /** Stops listening and drops every relayed session. */
  cut(): Promise<void>;
  /** Listens again. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function cuttableRelay(target: { host: string; port: number }): Promise<CuttableRelay> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = (): Promise<void> =>
    new Promise((resolve) => {
      server = createServer((client) => {
        const upstream = connect(target.port, target.host);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          socket.on('error', () => undefined);
        }
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as AddressInfo).port;
        resolve();
      });
    });
  const cut = async (): Promise<void> => {
    const closing = new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    for (const socket of sockets) socket.destroy();
    await closing;
    server = undefined;
  };
  await listen();
  return { port, cut, restore: listen, close: cut };
}

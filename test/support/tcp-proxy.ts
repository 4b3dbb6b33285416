// A TCP proxy in front of a real server, for tests that take the server away from one
// client without touching the shared server: down closes every open connection and
// refuses new ones, as a server process that died would; up listens again on the same port.
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";

export interface TcpProxy {
  port: number;
  setAvailable(available: boolean): Promise<void>;
  close(): Promise<void>;
}

export async function tcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const track = (s: Socket) => { sockets.add(s); s.on("close", () => sockets.delete(s)); };

  const listen = () => new Promise<void>((resolve, reject) => {
    const s = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      track(client);
      track(upstream);
      const end = () => { client.destroy(); upstream.destroy(); };
      client.on("error", end);
      upstream.on("error", end);
      client.pipe(upstream).pipe(client);
    });
    s.once("error", reject);
    s.listen(port, "127.0.0.1", () => { port = (s.address() as AddressInfo).port; server = s; resolve(); });
  });
  const shut = async () => {
    const s = server;
    server = undefined;
    // destroy() (FIN) as the kernel does for a dead process; resetAndDestroy() on a socket
    // already half-closed leaves its handle open on Node 20.
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await listen();
  return {
    get port() { return port; },
    setAvailable: async (available) => {
      if (available && !server) await listen();
      if (!available) await shut();
    },
    close: shut,
  };
}

// A TCP "Service" in front of several endpoints, as kube-proxy puts one in front of a
// Deployment's pods: each connection goes to the next endpoint in turn, and to the one after
// it when that one refuses (an endpoint whose process died is passed over, as a pod that
// fails its readiness leaves the Service's endpoints).
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

export interface TcpService {
  /** host:port to reach the endpoints through. */
  address: string;
  close(): Promise<void>;
}

export async function tcpService(endpoints: string[]): Promise<TcpService> {
  if (endpoints.length === 0) throw new Error("a TCP service needs at least one endpoint");
  const sockets = new Set<Socket>();
  const track = (s: Socket) => { sockets.add(s); s.on("close", () => sockets.delete(s)); };
  let next = 0;
  /** Connects `client` to the endpoint `tried` places after `start`, or the one after it should it refuse. */
  const dial = (client: Socket, start: number, tried: number) => {
    if (tried === endpoints.length) return void client.destroy();
    const endpoint = endpoints[(start + tried) % endpoints.length]!;
    const colon = endpoint.lastIndexOf(":");
    const upstream = connect(Number(endpoint.slice(colon + 1)), endpoint.slice(0, colon));
    let connected = false;
    upstream.once("error", () => { if (!connected) dial(client, start, tried + 1); });
    upstream.once("connect", () => {
      connected = true;
      track(upstream);
      const end = () => { client.destroy(); upstream.destroy(); };
      upstream.on("error", end);
      upstream.on("close", end);
      client.on("close", end);
      client.pipe(upstream).pipe(client);
      client.resume();
    });
  };
  const server = createServer({ pauseOnConnect: true }, (client) => {
    track(client);
    client.on("error", () => client.destroy());
    const start = next;
    next = (next + 1) % endpoints.length;
    dial(client, start, 0);
  });
  await new Promise<void>((resolve, reject) => { server.once("error", reject); server.listen(0, "127.0.0.1", resolve); });
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// What the tunnel's integration tests share (the tunnel's and `eph local connect`'s): the real
// sandbox core behind the real API (LocalService.Serve, with the test tokens when asked), the
// tunnel on the shared NATS JetStream under a fresh prefix (stopped and started again on its
// port when a test asks), a TCP echo server as a workstation's local workload, and a TCP
// relay between workstation and tunnel that a test can freeze or cut.
import { createServer, connect, type Server, type Socket } from "node:net";
import type { NatsConnection } from "@nats-io/nats-core";
import * as pb from "@ephemera/proto";
import {
  InMemoryEventStore, InMemoryLogStore, InMemoryValueStore, JetStreamEventStore, connectNats, type RecordedEvent,
} from "@ephemera/eventstore";
import { createLogger, startGrpcServer, waitFor, type Logger, type RunningServer, type ServerTls } from "@ephemera/kit";
import { apiServices } from "../../sandbox/src/api.js";
import { SandboxCore, type ApiAccess } from "../../sandbox/src/index.js";
import { testNats } from "../../../test/support/servers.js";
import { apiAuthorizer, type Authorize } from "./server/authorize.js";
import { TunnelMetrics } from "./server/metrics.js";
import { startTunnel, type RunningTunnel } from "./start.js";
import type { ListServices } from "./server/services.js";
import type { ReadEnvironment } from "./server/kube-environment.js";
import { Registry } from "@ephemera/kit/metrics";

export interface TunnelWorld {
  api: string;
  core: SandboxCore;
  /** The tunnel running now: reopenTunnel() replaces it. */
  tunnel: RunningTunnel;
  store: JetStreamEventStore;
  metrics: Registry;
  logger: Logger;
  /** A sandbox with one local entry `backend` mapping port 8080 to `toLocal`; its routing key. */
  sandboxWithLocal(name: string, toLocal: string): Promise<string>;
  events(aggregate: string, id: string): Promise<RecordedEvent[]>;
  /** Waits until the aggregate holds an event of `type` matching `match`, and returns it. */
  waitForEvent(aggregate: string, id: string, type: string, match?: (data: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<RecordedEvent>;
  /** A new tunnel on the last one's port, that one stopped first if it still runs (its sessions end as shutdown). */
  reopenTunnel(): Promise<RunningTunnel>;
  stop(): Promise<void>;
}

export interface WorldOptions {
  access?: ApiAccess;
  tls?: ServerTls;
  liveness?: { intervalMs: number; timeoutMs: number };
  refreshMs?: number;
  acceptTimeoutMs?: number;
  /** Wraps the API's answer (a token that stops working). */
  authorize?: (real: Authorize) => Authorize;
  listServices?: ListServices;
  /** The cluster /v1/environment reads (kubeEnvironment over a kube-sim); absent: the tunnel sees none. */
  readEnvironment?: ReadEnvironment;
  /** Where the tunnel logs; default silent (LOG_LEVEL to see it). */
  logger?: Logger;
  /** The cluster's name servers for dial targets (EPHEMERA_TUNNEL_DNS); default the system's resolver. */
  dns?: string[];
}

export async function startWorld(options: WorldOptions = {}): Promise<TunnelWorld> {
  const logger = options.logger ?? createLogger("tunnel-test", process.env["LOG_LEVEL"] ?? "silent");
  const nats = testNats("tun");
  const nc: NatsConnection = await connectNats(nats.url, "tunnel-test");
  const store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
  let keys = 0;
  const core = new SandboxCore({
    store: new InMemoryEventStore(), logs: new InMemoryLogStore(), values: new InMemoryValueStore(), logger, previewDomain: "preview.test",
    routingKey: () => `rk${nats.prefix.slice(-6)}${String(++keys).padStart(4, "0")}`,
  });
  await core.start();
  const grpcServer: RunningServer = await startGrpcServer("127.0.0.1:0", apiServices(core, logger, options.access), logger);
  const api = `127.0.0.1:${grpcServer.port}`;
  const authorizer = apiAuthorizer(api, undefined);
  const metrics = new Registry();
  const tunnelMetrics = new TunnelMetrics(metrics);
  const openTunnel = (listen: string) => startTunnel({
    listen, podAddress: "127.0.0.1", refreshMs: options.refreshMs ?? 60_000, acceptTimeoutMs: options.acceptTimeoutMs ?? 10_000,
    dns: options.dns ?? [], name: "tunnel-test", liveness: options.liveness ?? { intervalMs: 2_000, timeoutMs: 5_000 }, ...(options.tls ? { tls: options.tls } : {}),
  }, {
    store, logger, metrics: tunnelMetrics,
    authorize: options.authorize ? options.authorize(authorizer.authorize) : authorizer.authorize,
    ...(options.listServices ? { listServices: options.listServices } : {}), ...(options.readEnvironment ? { readEnvironment: options.readEnvironment } : {}),
  });
  const events = async (aggregate: string, id: string) => (await store.read(aggregate, id)).events;
  const world: TunnelWorld = {
    api, core, tunnel: await openTunnel("127.0.0.1:0"), store, metrics, logger, events,
    async sandboxWithLocal(name, toLocal) {
      const sandbox = pb.Sandbox.fromJSON({
        name, spec: { cluster: "local", local: [{ name: "backend", from: { kind: "Deployment", namespace: "demo", name: "backend" }, mappings: [{ port: 8080, toLocal }] }] },
      });
      const applied = await core.applySandbox(sandbox);
      return applied.sandbox!.routingKey;
    },
    waitForEvent: (aggregate, id, type, match = () => true, timeoutMs = 10_000) => waitFor(async () =>
      (await events(aggregate, id)).find((e) => e.type === type && match(e.data as Record<string, unknown>)), { timeoutMs, what: `${type} on ${aggregate}.${id}` }),
    async reopenTunnel() {
      await world.tunnel.stop();
      world.tunnel = await openTunnel(world.tunnel.address);
      return world.tunnel;
    },
    async stop() {
      await world.tunnel.stop();
      authorizer.close();
      await grpcServer.shutdown();
      await core.stop();
      await nats.cleanup(nc);
      await nc.close();
    },
  };
  return world;
}

/** A TCP server answering every chunk with `prefix` + the chunk, as a workstation's local workload. */
export async function echoServer(prefix = "echo:"): Promise<{ port: number; sockets: Set<Socket>; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    socket.on("data", (chunk) => socket.write(`${prefix}${chunk.toString()}`));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port, sockets,
    close: () => { for (const s of sockets) s.destroy(); return new Promise((resolve) => server.close(() => resolve())); },
  };
}

/**
 * A TCP relay in front of the tunnel: `freeze` stops carrying bytes (a workstation gone
 * silent, its TCP connection still open), `cut` destroys both sides (a killed workstation).
 */
export async function relay(target: number): Promise<{ port: number; freeze(): void; cut(): void; open(): number; close(): Promise<void> }> {
  const pairs = new Set<[Socket, Socket]>();
  let frozen = false;
  const server: Server = createServer((inbound) => {
    const outbound = connect(target, "127.0.0.1");
    const pair: [Socket, Socket] = [inbound, outbound];
    pairs.add(pair);
    for (const s of pair) s.on("error", () => undefined);
    inbound.on("data", (chunk) => { if (!frozen) outbound.write(chunk); });
    outbound.on("data", (chunk) => { if (!frozen) inbound.write(chunk); });
    const end = () => { inbound.destroy(); outbound.destroy(); pairs.delete(pair); };
    // Frozen, the workstation's side closing (its client gave up on the silence) is not passed
    // on: to the tunnel the workstation stays silent, its TCP connection open, until cut or closed.
    inbound.on("close", () => { if (!frozen) end(); });
    outbound.on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const cut = () => { for (const [a, b] of pairs) { a.destroy(); b.destroy(); } };
  return {
    port: (server.address() as { port: number }).port,
    freeze: () => { frozen = true; },
    cut,
    /** The connections carried now: one ends when the tunnel closes its side (or on cut). */
    open: () => pairs.size,
    close: () => { cut(); return new Promise((resolve) => server.close(() => resolve())); },
  };
}

/** Connects to `address` (host:port), writes `text`, and resolves with what came back once it holds `until`. */
export function exchange(port: number, text: string, until: string): Promise<{ socket: Socket; received: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.on("error", reject);
    socket.on("data", (chunk) => {
      received += chunk.toString();
      if (received.includes(until)) resolve({ socket, received });
    });
    socket.write(text);
  });
}

/** The port of the listener the tunnel opened for `port` of a local, from its locals.connected event. */
export function listenerPort(connected: RecordedEvent, port = 8080): number {
  const addresses = (connected.data as { addresses: Array<{ port: number; address: string }> }).addresses;
  const address = addresses.find((a) => a.port === port)?.address;
  if (!address) throw new Error(`no address for port ${port} in ${JSON.stringify(addresses)}`);
  return Number(address.slice(address.lastIndexOf(":") + 1));
}

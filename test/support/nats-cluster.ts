// A three-node NATS JetStream cluster of a test's own on loopback: three nats-server
// processes with cluster routes to each other, each on free ports with its own store under
// the test's directory. A node can be killed and started again on the same ports and store,
// as a server that comes back after a crash does.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connectNats } from "@ephemera/eventstore";
import { waitFor } from "@ephemera/kit";
import { OwnServer } from "./own-servers.js";
import { freePort } from "./stack.js";

const NATS_SERVER = "/usr/sbin/nats-server";
const CLUSTER_NAME = "ephemera-test";

export interface NatsCluster {
  nodes: Array<OwnServer & { url: string }>;
  /** Every node's client URL, comma-separated: NATS_URL for the services. */
  url: string;
  /** Waits until JetStream answers through every running node (a meta leader is elected). */
  ready(timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

/** Why a JetStream cluster cannot be made here (no nats-server, or one older than clustered JetStream), or undefined. */
export function natsClusterUnavailable(): string | undefined {
  const r = spawnSync(NATS_SERVER, ["--version"], { encoding: "utf8" });
  if (r.error || r.status !== 0) return `${NATS_SERVER} does not run (${r.error?.message ?? `exit ${r.status}`}): apt-get install -y nats-server`;
  const [major = 0, minor = 0] = (/v(\d+)\.(\d+)/.exec(r.stdout)?.slice(1) ?? []).map(Number);
  // Clustered JetStream came with 2.2.
  if (major < 2 || (major === 2 && minor < 2)) return `${r.stdout.trim()} has no clustered JetStream (2.2 or later needed)`;
  return undefined;
}

export async function startNatsCluster(dir: string, size = 3): Promise<NatsCluster> {
  const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const routes = routePorts.map((p) => `nats-route://127.0.0.1:${p}`).join(", ");
  const nodes: Array<OwnServer & { url: string }> = [];
  try {
    for (const [i, routePort] of routePorts.entries()) {
      const name = `n${i + 1}`;
      const store = join(dir, name);
      // Each node routes to all three (itself included: the server ignores its own route).
      const conf = join(dir, `${name}.conf`);
      const node = await OwnServer.start({
        name: `nats-${name}`,
        command: NATS_SERVER,
        args: (port) => {
          writeFileSync(conf, [
            `server_name: ${name}`,
            `jetstream { store_dir: "${store}" }`,
            `cluster { name: ${CLUSTER_NAME}; listen: 127.0.0.1:${routePort}; routes: [${routes}] }`,
          ].join("\n"));
          return ["-a", "127.0.0.1", "-p", String(port), "-c", conf];
        },
        ready: /Server is ready/,
      }, store);
      nodes.push(Object.assign(node, { url: `nats://127.0.0.1:${node.port}` }));
    }
  } catch (err) {
    for (const n of nodes) await n.stop("SIGKILL").catch(() => undefined);
    throw err;
  }
  const url = nodes.map((n) => n.url).join(",");
  return {
    nodes,
    url,
    ready: async (timeoutMs) => {
      for (const node of nodes.filter((n) => n.running)) {
        const nc = await connectNats(node.url, "cluster-ready");
        try {
          let last = "";
          await waitFor(async () => {
            try {
              // Its own check is the account info request: it fails until a meta leader is elected.
              await jetstreamManager(nc, { timeout: 2_000 });
              return true;
            } catch (err) {
              last = (err as Error).message;
              return false;
            }
          }, { timeoutMs, intervalMs: 200, what: `JetStream to answer through ${node.url} (last: ${last || "nothing yet"})` });
        } finally {
          await nc.close();
        }
      }
    },
    stop: async () => {
      for (const n of nodes) await n.stop();
    },
  };
}

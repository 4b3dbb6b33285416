// What `eph local connect` needs of a tunnel session (@ephemera/tunnel/client's TunnelClient):
// the daemon, the proxies and the host entries are written against this, so each can be
// tested with a dial to real local servers, and the client library is loaded only by the daemon.
import type { Duplex } from "node:stream";

/** Workstation → cluster: one TCP stream to `host:port` as the cluster sees it. */
export type Dial = (host: string, port: number) => Promise<Duplex>;

export interface Served {
  sandbox: string;
  routingKey: string;
  local: string;
  mappings: Array<{ port: number; toLocal: string }>;
  /** The sandbox's status reason as the tunnel last heard it from the API (Ready, Provisioning, …). */
  status?: string;
}

export interface ClusterService {
  namespace: string;
  name: string;
  ports: number[];
}

/** A local's baseline configuration as the tunnel reads it from the cluster (the tunnel's /v1/environment). */
export interface Environment {
  sandbox: string;
  local: string;
  baseline: { kind: string; namespace: string; name: string; container: string };
  /** The baseline container's env, in the kubelet's order. */
  env: Array<{ name: string; value: string }>;
  /** The local's env and files from a Secret, a ConfigMap or a fork (a file's value base64). */
  values: { env: Array<{ name: string; value: string }>; files: Array<{ path: string; value: string }> };
  unresolved: string[];
}

/** One open session with the tunnel. */
export interface TunnelSession {
  readonly sessionId: string;
  serving: Served[];
  dial: Dial;
  services(): Promise<ClusterService[]>;
  /** The environment of a local this session serves (Secrets' values among it). */
  environment(sandbox: string, local: string): Promise<Environment>;
  close(): Promise<void>;
  on(event: "serving", listener: (serving: Served[]) => void): unknown;
  on(event: "closed", listener: (why: { reason: string; error?: Error }) => void): unknown;
}

export interface OpenOptions {
  address: string;
  token?: string;
  tls?: boolean | { ca?: Buffer; servername?: string };
  sandboxes?: string[];
  client?: string;
}

/** Opens a session: resolves on the tunnel's welcome, rejects when it refuses or cannot be reached. */
export type OpenTunnel = (options: OpenOptions) => Promise<TunnelSession>;

/**
 * The tunnel said no (a bad token, a role that may not serve, an unknown sandbox): trying again
 * will not help. A 503 is not such a no: the tunnel is stopping (a restart, a rolling update) or
 * cannot open a session for now, and a reconnect is tried again as for an unreachable tunnel.
 */
export function isRefusal(err: unknown): boolean {
  return err instanceof Error && err.name === "TunnelRefused" && (err as Error & { status?: number }).status !== 503;
}

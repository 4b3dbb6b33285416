// The tunnel's wire protocol, shared by the server and the client library: paths, headers,
// the control stream's newline-delimited JSON messages, and reading them off a stream.
// docs/tunnel.md describes it for other clients.
import type { Readable } from "node:stream";

export const PATHS = {
  session: "/v1/session",
  /** Followed by the id of the "open" it answers. */
  accept: "/v1/accept/",
  dial: "/v1/dial",
  services: "/v1/services",
  environment: "/v1/environment",
  /** Followed by a session id: 200 while it is open on this tunnel, else 404 (the cluster's health check). */
  sessions: "/v1/sessions/",
  health: "/healthz",
} as const;

export const HEADERS = {
  session: "x-ephemera-session",
  target: "x-ephemera-target",
  error: "x-ephemera-error",
} as const;

/** A control message is one line; a longer one ends the session (nothing legitimate is near it). */
export const MAX_LINE_BYTES = 64 * 1024;

/**
 * HTTP/2 flow-control windows, both ends. Node's default (64 KiB) lets one stream carry
 * 64 KiB per round trip whatever the link: about 3 MiB/s at 20 ms. A stream may have 1 MiB
 * in flight, the whole connection 8 MiB (several connections carried at once).
 */
export const WINDOWS = { stream: 1 << 20, connection: 8 << 20 } as const;

export interface Mapping { port: number; toLocal: string }

/** A local workload the session serves: the cluster's requests for `port` go to `toLocal` on the workstation. */
export interface Served {
  sandbox: string; routingKey: string; local: string; mappings: Mapping[];
  /** The sandbox's status reason as the API last said (Ready, Provisioning, …); absent from older tunnels. */
  status?: string;
}

export interface ClusterService { namespace: string; name: string; ports: number[] }

/** `POST /v1/environment`'s body: a local workload the session serves. */
export interface EnvironmentRequest { sandbox: string; local: string }

/**
 * Its answer: the baseline's configuration as the cluster has it, and the values of the
 * local's own customizations that only the cluster holds. It carries Secrets' values.
 */
export interface Environment {
  sandbox: string;
  local: string;
  /** The workload read (`local.from`) and the container whose env this is. */
  baseline: { kind: string; namespace: string; name: string; container: string };
  /** The container's env as the kubelet gives it: envFrom first, then env in order, `$(VAR)` expanded; a later name wins. */
  env: Array<{ name: string; value: string }>;
  /** The local's env and files whose valueFrom is a Secret, a ConfigMap or a fork (a file's value base64). */
  values: { env: Array<{ name: string; value: string }>; files: Array<{ path: string; value: string }> };
  /** What could not be given, each naming the variable or file and why. */
  unresolved: string[];
}

export type ClientMessage =
  | { type: "hello"; sandboxes: string[]; client: string }
  | { type: "refresh" }
  | { type: "bye" };

export type SessionEndReason = "disconnect" | "lost" | "shutdown" | "revoked";

export type ServerMessage =
  | { type: "welcome"; sessionId: string; subject: string; serving: Served[] }
  | { type: "serving"; serving: Served[] }
  | { type: "open"; id: string; sandbox: string; local: string; port: number; toLocal: string }
  /** Sent before the server ends the session itself (an addition to the first protocol: clients may ignore it). */
  | { type: "closing"; reason: SessionEndReason };

export const line = (message: ClientMessage | ServerMessage): string => `${JSON.stringify(message)}\n`;

/**
 * Calls `onMessage` with each line of the stream parsed as JSON (empty lines skipped), and
 * `onError` once when a line is not JSON or is over MAX_LINE_BYTES; nothing is read after that.
 */
export function readLines(stream: Readable, onMessage: (message: unknown) => void, onError: (err: Error) => void): void {
  let buffered = "";
  let failed = false;
  const fail = (err: Error) => {
    failed = true;
    stream.removeListener("data", onData);
    onError(err);
  };
  const onData = (chunk: Buffer | string) => {
    buffered += chunk.toString();
    let newline: number;
    while (!failed && (newline = buffered.indexOf("\n")) >= 0) {
      const text = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (!text) continue;
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch {
        return fail(new Error(`a control message is not JSON: ${text.slice(0, 80)}`));
      }
      onMessage(message);
    }
    if (!failed && Buffer.byteLength(buffered) > MAX_LINE_BYTES) fail(new Error(`a control message is over ${MAX_LINE_BYTES} bytes`));
  };
  stream.on("data", onData);
}

/** `host:port` of a target; undefined when it is not one (port 1 to 65535, a host of name characters or an IP). */
export function parseTarget(target: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[a-zA-Z0-9.-]+):(\d{1,5})$/.exec(target.trim());
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65_535) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port };
}

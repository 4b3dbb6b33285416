// ephemera-router's configuration, from the environment the injection gives its container.
// Every bad or missing setting is named at once, with the variable; the token never is.
import { clientTlsFromEnv, envInt, envString, errorMessage, type ClientTls, type Env } from "@ephemera/kit/client";
import { FORK_KINDS } from "@ephemera/kit/fork-name";

/** The baseline workload whose pods the router runs in: the rules it follows are this workload's. */
export interface Workload {
  kind: string;
  namespace: string;
  name: string;
}

/** An app port whose inbound traffic the init container redirects to the router's listen port. */
export interface PortMapping {
  appPort: number;
  listenPort: number;
}

export interface RouterConfig {
  /** EPHEMERA_ROUTER_WORKLOAD: `<Kind>/<namespace>/<name>`. */
  workload: Workload;
  /** EPHEMERA_ROUTER_PORTS: `<appPort>:<listenPort>,...`. */
  ports: PortMapping[];
  /** EPHEMERA_ROUTES: host:port of the Routes API (gRPC). */
  routes: string;
  /** EPHEMERA_TOKEN: a bearer token (viewer or above) for the Routes API; absent: none sent. */
  token?: string;
  /** EPHEMERA_TLS, EPHEMERA_TLS_CA, … as for every ephemera client; absent: plaintext. */
  tls?: ClientTls;
  /** EPHEMERA_ROUTER_HEALTH_LISTEN: host:port of `GET /healthz`. */
  healthListen: string;
  /** EPHEMERA_ROUTER_SNIFF_TIMEOUT_MS: how long a connection may stay silent before it is taken for plain TCP. */
  sniffTimeoutMs: number;
}

export const DEFAULT_ROUTES = "routeserver.ephemera.svc:7777";
export const DEFAULT_HEALTH_LISTEN = "0.0.0.0:15020";
/**
 * A client speaks first in HTTP; a server-first protocol (SMTP, MySQL) sends nothing until
 * its greeting, so a silent connection goes to the app as TCP after this long. Long enough
 * that a slow HTTP client is not mistaken for one.
 */
export const DEFAULT_SNIFF_TIMEOUT_MS = 1000;

/** The kinds a baseline may be (those ephemera forks). */
/** The kinds a baseline may be: those a sandbox may fork. */
export const WORKLOAD_KINDS = FORK_KINDS;

export class RouterConfigError extends Error {
  override readonly name = "RouterConfigError";
  constructor(readonly problems: string[]) {
    super(`ephemera-router: ${problems.join("; ")}`);
  }
}
export const isRouterConfigError = (e: unknown): e is RouterConfigError => e instanceof RouterConfigError;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export function routerConfig(env: Env): RouterConfig {
  const problems: string[] = [];
  const read = <T>(fn: () => T, fallback: T): T => {
    try {
      return fn();
    } catch (err) {
      problems.push(errorMessage(err));
      return fallback;
    }
  };
  const workload = read(() => parseWorkload(required(env, "EPHEMERA_ROUTER_WORKLOAD")), { kind: "", namespace: "", name: "" });
  const ports = read(() => parsePorts(required(env, "EPHEMERA_ROUTER_PORTS")), []);
  const routes = read(() => hostPort("EPHEMERA_ROUTES", envString(env, "EPHEMERA_ROUTES", DEFAULT_ROUTES)), "");
  const healthListen = read(() => hostPort("EPHEMERA_ROUTER_HEALTH_LISTEN", envString(env, "EPHEMERA_ROUTER_HEALTH_LISTEN", DEFAULT_HEALTH_LISTEN)), "");
  const tls = read(() => clientTlsFromEnv(env), undefined);
  const sniffTimeoutMs = read(() => envInt(env, "EPHEMERA_ROUTER_SNIFF_TIMEOUT_MS", DEFAULT_SNIFF_TIMEOUT_MS), DEFAULT_SNIFF_TIMEOUT_MS);
  const healthPort = Number(healthListen.slice(healthListen.lastIndexOf(":") + 1));
  const taken = ports.find((p) => p.listenPort === healthPort || p.appPort === healthPort);
  if (healthListen && taken) {
    problems.push(`EPHEMERA_ROUTER_HEALTH_LISTEN's port ${healthPort} is also in EPHEMERA_ROUTER_PORTS (${taken.appPort}:${taken.listenPort}); give it a port of its own`);
  }
  if (problems.length) throw new RouterConfigError(problems);
  const token = envString(env, "EPHEMERA_TOKEN", "");
  return { workload, ports, routes, ...(token ? { token } : {}), ...(tls ? { tls } : {}), healthListen, sniffTimeoutMs };
}

function required(env: Env, name: string): string {
  const v = envString(env, name, "").trim();
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

/** Pure: `<Kind>/<namespace>/<name>`, e.g. `Deployment/shop/orders`. */
export function parseWorkload(value: string, variable = "EPHEMERA_ROUTER_WORKLOAD"): Workload {
  const parts = value.split("/");
  const [kind = "", namespace = "", name = ""] = parts;
  if (parts.length !== 3 || !kind || !namespace || !name) {
    throw new Error(`${variable} must be <Kind>/<namespace>/<name> (e.g. Deployment/shop/orders), got "${value}"`);
  }
  if (!(WORKLOAD_KINDS as readonly string[]).includes(kind)) {
    throw new Error(`${variable}: the kind must be one of ${WORKLOAD_KINDS.join(", ")}, got "${kind}"`);
  }
  if (!DNS_LABEL.test(namespace)) throw new Error(`${variable}: the namespace must be a DNS label (lowercase letters, digits, '-'), got "${namespace}"`);
  if (!DNS_SUBDOMAIN.test(name)) throw new Error(`${variable}: the name must be a DNS subdomain (lowercase letters, digits, '-', '.'), got "${name}"`);
  return { kind, namespace, name };
}

/**
 * Pure: `<appPort>:<listenPort>,...`. Each port 1–65535; an app port is mapped once, a
 * listen port used once, and no listen port is an app port (the router would capture its own).
 */
export function parsePorts(value: string, variable = "EPHEMERA_ROUTER_PORTS"): PortMapping[] {
  const entries = value.split(",").map((e) => e.trim()).filter((e) => e !== "");
  if (!entries.length) throw new Error(`${variable} must list <appPort>:<listenPort> pairs separated by commas (e.g. 8080:15000,9090:15001), got "${value}"`);
  const ports = entries.map((entry) => {
    const m = /^(\d{1,5}):(\d{1,5})$/.exec(entry);
    const [appPort, listenPort] = m ? [Number(m[1]), Number(m[2])] : [0, 0];
    if (!m || !isPort(appPort) || !isPort(listenPort)) {
      throw new Error(`${variable}: "${entry}" is not <appPort>:<listenPort> with ports from 1 to 65535`);
    }
    return { appPort, listenPort };
  });
  const seen = (pick: (p: PortMapping) => number) => ports.map(pick).find((n, i, all) => all.indexOf(n) !== i);
  const twiceApp = seen((p) => p.appPort);
  if (twiceApp !== undefined) throw new Error(`${variable}: app port ${twiceApp} is mapped twice`);
  const twiceListen = seen((p) => p.listenPort);
  if (twiceListen !== undefined) throw new Error(`${variable}: listen port ${twiceListen} is used twice`);
  const apps = new Set(ports.map((p) => p.appPort));
  const clash = ports.find((p) => apps.has(p.listenPort));
  if (clash) throw new Error(`${variable}: listen port ${clash.listenPort} is also an app port; the router would capture its own traffic`);
  return ports;
}

const isPort = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535;

/** `host:port` or `[v6]:port`, returned as given. */
function hostPort(variable: string, value: string): string {
  const i = value.lastIndexOf(":");
  const host = value.slice(0, i);
  const port = Number(value.slice(i + 1));
  if (i <= 0 || !host || /\s/.test(value) || !/^\d+$/.test(value.slice(i + 1)) || !isPort(port)) {
    throw new Error(`${variable} must be host:port (e.g. ${variable === "EPHEMERA_ROUTES" ? DEFAULT_ROUTES : DEFAULT_HEALTH_LISTEN}), got "${value}"`);
  }
  return value;
}

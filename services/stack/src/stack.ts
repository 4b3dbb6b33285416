// Runs the whole of ephemera locally: the six services as child processes with the
// process driver for cluster `local`, ready once the API and the IO context answer
// health checks (and the console its /healthz, on a port fixed in advance). A service that dies is restarted with backoff until stop().
import { spawn } from "node:child_process";
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { createInterface } from "node:readline";
import {
  CONSOLE_SERVER, DEFAULT_API_LISTEN, DEFAULT_GATEWAY_LISTEN, DEFAULT_IOCONTEXT_LISTEN, DEFAULT_JOBS_LISTEN, DEFAULT_ROUTES_HTTP_LISTEN, DEFAULT_ROUTES_LISTEN, EphemeraError, GATEWAY_SERVER, ROUTES_SERVER, TUNNEL_SERVER, checkHealth, clientTlsFromEnv, envBool, envInt, envString, errorMessage,
  openApiNotice, waitFor, type ClientTls, type Env,
} from "@ephemera/kit";
import { DEFAULT_BACKOFF, type Backoff } from "./backoff.js";

/** Where the tunnel service listens by default (as @ephemera/tunnel's DEFAULT_TUNNEL_LISTEN; the stack does not load the service). */
export const DEFAULT_TUNNEL_LISTEN = "127.0.0.1:7785";
/** Where the console listens by default (as @ephemera/console's DEFAULT_CONSOLE_LISTEN). */
export const DEFAULT_CONSOLE_LISTEN = "127.0.0.1:7790";
import { Supervisor, type Death, type Exit } from "./supervise.js";

export const SERVICES = ["iocontext", "scheduler", "runner", "sandbox", "tunnel", "console"] as const;
/** The webhook runs too with the Kubernetes driver (stackServices). */
export type ServiceName = (typeof SERVICES)[number] | "webhook";

/**
 * The services a stack runs: the six, and with the Kubernetes driver the webhook that
 * injects the routing sidecar, registered with that cluster (EPHEMERA_STACK_WEBHOOK=false
 * leaves it out).
 */
export function stackServices(env: Env): ServiceName[] {
  const kube = envString(env, "EPHEMERA_RUNNER_DRIVER", "process") === "kubernetes";
  return kube && envBool(env, "EPHEMERA_STACK_WEBHOOK", true) ? [...SERVICES, "webhook"] : [...SERVICES];
}

export interface StackOptions {
  env: Env;
  /** Where a service's log lines go (already formatted), and the stack's lines about it. */
  output: (service: ServiceName, line: string) => void;
  /** Path of a service's built entry point. */
  entry: (service: ServiceName) => string;
  /** How long start-up may take, restarts included. Default EPHEMERA_STACK_READY_TIMEOUT_MS, else 30 s. */
  readyTimeoutMs?: number;
  /** Restart delays; default 250 ms doubling to 10 s, reset after 30 s up. */
  backoff?: Partial<Backoff>;
  /** How long stop() waits after SIGTERM before SIGKILL. Default 15 s. */
  stopGraceMs?: number;
  /** Aborting it during start-up stops what was started and rejects. */
  signal?: AbortSignal;
}

export interface RunningStack {
  api: string;
  iocontext: string;
  /** The console's URL (http, or https with the API's certificate); undefined when it listens on a port picked at start. */
  console: string | undefined;
  /** Who may call the API, in a line to say at start: open on loopback, or asking for tokens. */
  access: string;
  /** The service's current process; undefined while it waits to be restarted and after stop(). */
  pid(service: ServiceName): number | undefined;
  /** How many times the service has been started again after dying. */
  restarts(service: ServiceName): number;
  /** Stops every service (SIGTERM, then SIGKILL after the grace period); nothing restarts once called. */
  stop(): Promise<void>;
}

/** Start-up did not finish in time; `dying` names the services that died meanwhile. */
export class StackNotReadyError extends EphemeraError {
  readonly code = "not-ready";
  readonly retryable = false;
  constructor(
    readonly timeoutMs: number,
    readonly dying: ReadonlyArray<{ service: ServiceName; deaths: number; last: Exit }>,
    options?: { cause?: unknown },
  ) {
    const why = dying.length
      ? dying.map((d) => `${d.service} kept dying (${d.deaths === 1 ? "once" : `${d.deaths} times`}, last it ${describeExit(d.last)})`).join("; ")
      : errorMessage(options?.cause);
    super(`the stack was not ready within ${timeoutMs} ms: ${why}`, options);
  }
}

/** stop was asked for (StackOptions.signal) before the stack was ready. */
export class StackInterruptedError extends EphemeraError {
  readonly code = "interrupted";
  readonly retryable = false;
}

/** The environment each service gets: the caller's, plus the stack's defaults. */
export function stackEnv(env: Env): Env {
  const api = envString(env, "EPHEMERA_API_LISTEN", DEFAULT_API_LISTEN);
  const io = envString(env, "EPHEMERA_IOCONTEXT_LISTEN", DEFAULT_IOCONTEXT_LISTEN);
  const jobs = envString(env, "EPHEMERA_JOBS_LISTEN", DEFAULT_JOBS_LISTEN);
  // The CLI dials the API, and the runner's steps the IO context, at the address given: a port
  // the system picks at start would be known to neither.
  for (const [name, address] of [["EPHEMERA_API_LISTEN", api], ["EPHEMERA_IOCONTEXT_LISTEN", io]] as const) {
    if (/:0$/.test(address)) throw new Error(`${name}=${address}: pnpm start needs a fixed port here (eph and the steps dial it); pick a free one`);
  }
  return {
    ...env,
    EPHEMERA_API_LISTEN: api,
    EPHEMERA_IOCONTEXT_LISTEN: io,
    EPHEMERA_IOCONTEXT_ADDR: envString(env, "EPHEMERA_IOCONTEXT_ADDR", io),
    // The sandbox service's JobAgent server, and where the runner's group pods (Kubernetes driver)
    // reach it; on a port picked at start the pods could not know it: the runner keeps none then.
    EPHEMERA_JOBS_LISTEN: jobs,
    EPHEMERA_POD_JOBS: envString(env, "EPHEMERA_POD_JOBS", /:0$/.test(jobs) ? "" : jobs),
    EPHEMERA_CLUSTER: envString(env, "EPHEMERA_CLUSTER", "local"),
    EPHEMERA_RUNNER_DRIVER: envString(env, "EPHEMERA_RUNNER_DRIVER", "process"),
    // Health ports of the services without an API: any free port unless chosen.
    EPHEMERA_SCHEDULER_LISTEN: envString(env, "EPHEMERA_SCHEDULER_LISTEN", "127.0.0.1:0"),
    EPHEMERA_RUNNER_LISTEN: envString(env, "EPHEMERA_RUNNER_LISTEN", "127.0.0.1:0"),
    // Workstations' `eph local connect` (docs/tunnel.md); it asks the API who may serve what.
    EPHEMERA_TUNNEL_LISTEN: envString(env, "EPHEMERA_TUNNEL_LISTEN", DEFAULT_TUNNEL_LISTEN),
    // The web console (docs/console.md); it calls the API with each browser's token.
    EPHEMERA_CONSOLE_LISTEN: envString(env, "EPHEMERA_CONSOLE_LISTEN", DEFAULT_CONSOLE_LISTEN),
    EPHEMERA_API: envString(env, "EPHEMERA_API", api),
    // The webhook (Kubernetes driver) registers itself with the cluster the runner uses.
    EPHEMERA_WEBHOOK_REGISTER: envString(env, "EPHEMERA_WEBHOOK_REGISTER", "true"),
    // With the servers on TLS, the runner's steps dial the IO context on TLS too.
    ...(envString(env, "EPHEMERA_TLS_CERT", "") && !envString(env, "EPHEMERA_TLS", "") ? { EPHEMERA_TLS: "true" } : {}),
  };
}

/** Where each service serves /metrics under the stack, as an offset from EPHEMERA_METRICS_LISTEN's port. */
const METRICS_PORT_OFFSET: Record<ServiceName, number> = { sandbox: 0, scheduler: 1, runner: 2, iocontext: 3, webhook: 4, tunnel: 5, console: 6 };

/**
 * The services share one EPHEMERA_METRICS_LISTEN: it names the first of their ports
 * (sandbox, scheduler, runner, iocontext, webhook, tunnel: `127.0.0.1:9400` gives 9400–9405,
 * each service's own default). Unset, or port 0, each takes any free port, as the health ports do, so two
 * stacks side by side never clash; each service logs the port it got ("metrics listening").
 */
export function metricsListenOf(env: Env, service: ServiceName): string {
  const listen = envString(env, "EPHEMERA_METRICS_LISTEN", "127.0.0.1:0");
  const i = listen.lastIndexOf(":");
  const port = Number(listen.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port === 0) return listen;
  return `${listen.slice(0, i)}:${port + METRICS_PORT_OFFSET[service]}`;
}

/**
 * Who may call the stack's API, said at start: an API without tokens is open, which is
 * fine on loopback; elsewhere it is refused here, before anything starts, unless
 * EPHEMERA_API_ALLOW_OPEN (the sandbox service would refuse it too). The Routes API, the
 * preview gateway and the tunnel follow the same rule.
 */
export function accessNotice(env: Env): string {
  const api = envString(env, "EPHEMERA_API_LISTEN", DEFAULT_API_LISTEN);
  const secured = !!(envString(env, "EPHEMERA_API_TOKENS", "") || envString(env, "EPHEMERA_API_JWKS", ""));
  const allowOpen = envBool(env, "EPHEMERA_API_ALLOW_OPEN", false);
  const routes = [envString(env, "EPHEMERA_ROUTES_LISTEN", DEFAULT_ROUTES_LISTEN), envString(env, "EPHEMERA_ROUTES_HTTP_LISTEN", DEFAULT_ROUTES_HTTP_LISTEN)];
  for (const listen of routes) openApiNotice(listen, { secured, allowOpen, server: ROUTES_SERVER });
  openApiNotice(envString(env, "EPHEMERA_GATEWAY_LISTEN", DEFAULT_GATEWAY_LISTEN), { secured, allowOpen, server: GATEWAY_SERVER });
  openApiNotice(envString(env, "EPHEMERA_TUNNEL_LISTEN", DEFAULT_TUNNEL_LISTEN), { secured, allowOpen, server: TUNNEL_SERVER });
  openApiNotice(envString(env, "EPHEMERA_CONSOLE_LISTEN", DEFAULT_CONSOLE_LISTEN), { secured, allowOpen, server: CONSOLE_SERVER });
  const open = openApiNotice(api, { secured, allowOpen });
  const transport = envString(env, "EPHEMERA_TLS_CERT", "") ? "over TLS" : "in plaintext";
  if (open) return `Note: ${open}; ${transport}. To ask for tokens, see docs/security.md.`;
  return `The API asks every call for a bearer token (eph: EPHEMERA_TOKEN or --token), ${transport}.`;
}

export async function startStack(options: StackOptions): Promise<RunningStack> {
  const env = stackEnv(options.env);
  // Settings that would stop a service are refused before any starts.
  const access = accessNotice(env);
  const healthTls = envString(env, "EPHEMERA_TLS_CERT", "") ? clientTlsFromEnv(env) : undefined;
  const backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
  const readyTimeoutMs = options.readyTimeoutMs ?? envInt(env, "EPHEMERA_STACK_READY_TIMEOUT_MS", 30_000);
  const startupDeaths = new Map<ServiceName, { service: ServiceName; deaths: number; last: Exit }>();
  let starting = true;

  const launch = (service: ServiceName) => () => {
    const child = spawn(process.execPath, [options.entry(service)], {
      env: { ...env, EPHEMERA_METRICS_LISTEN: metricsListenOf(env, service) } as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on("line", (line) => options.output(service, line));
    }
    return child;
  };
  const died = (service: ServiceName) => (death: Death) => {
    options.output(service, restartLine(service, death));
    if (!starting) return;
    const seen = startupDeaths.get(service);
    startupDeaths.set(service, { service, deaths: (seen?.deaths ?? 0) + 1, last: death.exit });
  };
  const supervisors = new Map(stackServices(env).map((s) => [s, new Supervisor(launch(s), backoff, died(s))] as const));

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= Promise.all([...supervisors.values()].map((s) => s.stop(options.stopGraceMs ?? 15_000))).then(() => undefined));

  const api = env["EPHEMERA_API_LISTEN"]!;
  const iocontext = env["EPHEMERA_IOCONTEXT_LISTEN"]!;
  const consoleUrl = consoleUrlOf(env);
  // Ends both health waits as soon as one fails or the caller aborts.
  const waiting = new AbortController();
  const interrupt = () => waiting.abort();
  if (options.signal?.aborted) interrupt();
  options.signal?.addEventListener("abort", interrupt, { once: true });
  try {
    await Promise.all([
      healthy(api, readyTimeoutMs, waiting.signal, healthTls), healthy(iocontext, readyTimeoutMs, waiting.signal, healthTls),
      ...(consoleUrl ? [httpHealthy(`${consoleUrl}/healthz`, readyTimeoutMs, waiting.signal, healthTls)] : []),
    ]);
  } catch (err) {
    waiting.abort();
    await stop();
    if (options.signal?.aborted) throw new StackInterruptedError("the stack was stopped during start-up", { cause: err });
    const dying = [...startupDeaths.values()].sort((a, b) => b.deaths - a.deaths);
    throw new StackNotReadyError(readyTimeoutMs, dying, { cause: err });
  } finally {
    options.signal?.removeEventListener("abort", interrupt);
    starting = false;
  }
  return {
    api,
    iocontext,
    console: consoleUrl,
    access,
    pid: (service) => supervisors.get(service)?.pid,
    restarts: (service) => supervisors.get(service)?.restarts ?? 0,
    stop,
  };
}

/** The stack's own line about a death, shaped like the services' pino lines. */
function restartLine(service: ServiceName, death: Death): string {
  return JSON.stringify({
    level: 40, time: Date.now(), name: "stack", service,
    msg: `${service} ${describeExit(death.exit)}; restarting`,
    code: death.exit.code, signal: death.exit.signal, upMs: death.upMs, attempt: death.attempt, delayMs: death.delayMs,
  });
}

function describeExit({ code, signal }: Exit): string {
  return signal ? `was killed by ${signal}` : code === null ? "could not start" : `exited with code ${code}`;
}


/**
 * Waits until the gRPC server at `address` reports SERVING (status field 1 = SERVING), dialing
 * it with `tls` when given. Rejects once `signal` is aborted.
 */
export async function healthy(address: string, timeoutMs = 30_000, signal?: AbortSignal, tls?: ClientTls): Promise<void> {
  await waitFor(async () => signal?.aborted || checkHealth(address, 1000, tls), { timeoutMs, intervalMs: 100, what: `gRPC health of ${address}` });
  if (signal?.aborted) throw new Error(`stopped waiting for gRPC health of ${address}`, { cause: signal.reason });
}

/**
 * The console's URL as a browser on this machine opens it: https when the stack serves TLS
 * (the console uses the API's certificate); undefined when its port is picked at start.
 */
export function consoleUrlOf(env: Env): string | undefined {
  const listen = envString(env, "EPHEMERA_CONSOLE_LISTEN", DEFAULT_CONSOLE_LISTEN);
  const i = listen.lastIndexOf(":");
  const port = listen.slice(i + 1);
  if (i < 0 || port === "0") return undefined;
  const host = listen.slice(0, i);
  const local = host === "" || host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host;
  return `${envString(env, "EPHEMERA_TLS_CERT", "") ? "https" : "http"}://${local}:${port}`;
}

/** Waits until `url` answers 200, trusting `tls`'s CA for https. Rejects once `signal` is aborted. */
export async function httpHealthy(url: string, timeoutMs = 30_000, signal?: AbortSignal, tls?: ClientTls): Promise<void> {
  const once = () => new Promise<boolean>((resolve) => {
    const get = url.startsWith("https:") ? httpsGet : httpGet;
    const req = get(url, { timeout: 1000, ...(tls?.ca ? { ca: tls.ca } : {}), ...(tls?.serverName ? { servername: tls.serverName } : {}) }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
  await waitFor(async () => signal?.aborted || once(), { timeoutMs, intervalMs: 100, what: `${url} to answer` });
  if (signal?.aborted) throw new Error(`stopped waiting for ${url}`, { cause: signal.reason });
}

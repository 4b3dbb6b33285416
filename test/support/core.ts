// ephemera in one process on its in-memory ports: the real sandbox core behind the public
// gRPC API, the real scheduler, the real IO context and a real runner whose process driver
// runs the step scripts. No servers to share, so each test can have its own and see
// exactly what was written (`store`), what the user got (through the API), and what ran.
// A test may hand in the JetStream event store and output journal instead (`stores`).
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  InMemoryClaimStore, InMemoryEventStore, InMemoryLogStore, InMemoryValueStore, InMemoryWorkQueue, type Commit, type EventStore, type RecordedEvent,
  type ValueStore,
} from "@ephemera/eventstore";
import { createLogger, startGrpcServer, waitFor, type ClientTls, type Logger, type RunningServer, type ServerTls } from "@ephemera/kit";
import type { Registry } from "@ephemera/kit/metrics";
import { InMemoryOutputStore, start as startIOContext, type Redis, type RunningIOContext } from "../../services/iocontext/src/index.js";
import { start as startRunner, type RunningRunner } from "../../services/runner/src/start.js";
import { apiServices } from "../../services/sandbox/src/api.js";
import { SandboxCore, type AdmissionSettings, type ApiAccess } from "../../services/sandbox/src/index.js";
import { Scheduler, type SchedulerDeps } from "../../services/scheduler/src/scheduler.js";
import { processesMentioning } from "./processes.js";
import { TEST_KEY } from "./keys.js";

const ROOT = join(__dirname, "..", "..");
/** io-agent's built step program (`pnpm build`), as the process driver runs it. */
const LAUNCHER = join(ROOT, "services", "runner", "dist", "ephemera-launch");

type Dispatch = Parameters<SchedulerDeps["queue"]["publish"]>[2];

export interface CoreOptions {
  /** The cluster the runner serves (default `local`): a sandbox on another cluster has no runner. */
  cluster?: string;
  /** Base domain of the endpoint URLs (default `preview.test`). */
  previewDomain?: string;
  /** pino level of every service (default: LOG_LEVEL, else silent). */
  logLevel?: string;
  /** The public API's bearer tokens (default: none, open) and TLS (default: plaintext). */
  api?: { access?: ApiAccess; tls?: ServerTls };
  /** The IO context on TLS, and what the runner's steps trust to reach it (default: plaintext). */
  iocontextTls?: { server: ServerTls; client: ClientTls };
  /** The IO context caches outputs in this Redis (default: the in-memory twin, `outputs`). */
  redis?: Redis;
  /**
   * The event store and output journal every service uses (default: the in-memory twins),
   * e.g. the JetStream ones; the caller owns them (and their connection) and closes them.
   */
  stores?: { store: EventStore; values: ValueStore };
  /** The IO context counts its calls (and its Redis calls) in this registry (default: nothing counted). */
  metrics?: Registry;
  /** The runner's metrics (a registry of its own: its series share names with the IO context's). */
  runnerMetrics?: Registry;
  /** When the API holds creates under a burst (default: the service's DEFAULT_ADMISSION). */
  admission?: AdmissionSettings;
  /** Steps the runner runs at once (default 8). */
  runnerConcurrency?: number;
}

export interface Core {
  /** host:port of the public API (ResourcePluginService, SandboxService, LogService, EventService). */
  address: string;
  /** host:port of the IO context. */
  iocontext: string;
  store: EventStore;
  logs: InMemoryLogStore;
  outputs: InMemoryOutputStore;
  /** The sandbox service's core, to wait on its projections. */
  sandboxes: SandboxCore;
  /**
   * A directory steps see at the same path (the process driver gives each step its own
   * /tmp, so this one lives elsewhere): markers and gates shared by a test and its scripts.
   */
  scratch: string;
  /** Writes a file into `scratch` and returns its path. */
  file(name: string, content: string | Uint8Array): string;
  /** Routing keys are `<tag><counter>` (`<tag>00000001` first): 12 characters, unique to this core. */
  tag: string;
  /** Every event written so far, in order. */
  events(): Promise<RecordedEvent[]>;
  /** Waits until an event of this type (on this aggregate id, if given) has been written, and returns it. */
  waitForEvent(type: string, subject?: string, timeoutMs?: number): Promise<RecordedEvent>;
  /** Processes of this core's steps still running (host pids): step programs and scripts. */
  stepProcesses(): number[];
  /** Stops everything in reverse order and checks that no step process is left; idempotent. */
  stop(): Promise<void>;
}

export async function startCore(options: CoreOptions = {}): Promise<Core> {
  const logger: Logger = createLogger("core", options.logLevel ?? process.env["LOG_LEVEL"] ?? "silent");
  const cluster = options.cluster ?? "local";
  // Four random characters per core and a counter per sandbox: a script's processes are
  // told apart from those of any other core on this machine by their routing key.
  // A letter first: a routing key of digits only would read as a number in YAML.
  const random = randomBytes(4).readUInt32BE();
  const tag = String.fromCharCode(97 + (random % 26)) + (Math.floor(random / 26) % 36 ** 3).toString(36).padStart(3, "0");
  let keys = 0;
  const store = options.stores?.store ?? new InMemoryEventStore();
  const logs = new InMemoryLogStore();
  const outputs = new InMemoryOutputStore();
  const values = options.stores?.values ?? new InMemoryValueStore();
  const queue = new InMemoryWorkQueue<Dispatch>();
  const scratch = await mkdtemp(join("/var/tmp", `eph-core-${tag}-`));
  // Every step program is handed its run directory under here (in its environment).
  const workdir = await mkdtemp(join(tmpdir(), `eph-core-${tag}-runs-`));
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    const errors: unknown[] = [];
    for (const stop of stops.splice(0).reverse()) await stop().catch((err: unknown) => errors.push(err));
    if (errors.length) throw new AggregateError(errors, "stopping the in-memory core failed");
  };

  try {
    const sandboxes = new SandboxCore({
      store, logs, values, logger, previewDomain: options.previewDomain ?? "preview.test",
      routingKey: () => `${tag}${String(++keys).padStart(8, "0")}`,
      ...(options.admission ? { admission: options.admission } : {}),
    });
    await sandboxes.start();
    stops.push(() => sandboxes.stop());
    const api: RunningServer = await startGrpcServer("127.0.0.1:0", apiServices(sandboxes, logger, options.api?.access), logger,
      options.api?.tls ? { tls: options.api.tls } : {});
    // Stops run in reverse: the server goes last, after the core has ended its watch streams.
    stops.unshift(() => api.shutdown());

    const scheduler = new Scheduler({ store, queue, logger });
    await scheduler.start();
    stops.push(() => scheduler.stop());

    const io: RunningIOContext = await startIOContext({
      listen: "127.0.0.1:0", prefix: tag, keys: [TEST_KEY],
      ...(options.iocontextTls ? { tls: options.iocontextTls.server } : {}), ...(options.metrics ? { metrics: options.metrics } : {}),
    },
      { store, values, logger, ...(options.redis ? { redis: options.redis } : { outputs }) });
    stops.push(() => io.stop());

    const runner: RunningRunner = await startRunner({
      natsUrl: "", prefix: tag, cluster, concurrency: options.runnerConcurrency ?? 8, driver: "process", iocontextAddr: `127.0.0.1:${io.port}`,
      ...(options.iocontextTls ? { iocontextTls: options.iocontextTls.client } : {}),
      workdir, listen: "127.0.0.1:0", runnerId: `core-${tag}`, launcher: LAUNCHER,
      hostEnv: Object.fromEntries(["PATH", "LANG"].flatMap((k) => (process.env[k] ? [[k, process.env[k]!]] : []))),
      // Steps still running when the test ends are stopped at once.
      cancelGraceMs: 500, shutdownGraceMs: 0, heartbeatMs: 1_000,
    }, {
      store, queue, logs, claims: new InMemoryClaimStore(), logger, signingKey: TEST_KEY, values,
      ...(options.runnerMetrics ? { metrics: options.runnerMetrics } : {}),
    });
    stops.push(() => runner.stop());

    const events = async (): Promise<RecordedEvent[]> => {
      const all: RecordedEvent[] = [];
      const sub = store.follow({}, (c: Commit) => void all.push(...c.events));
      await sub.caughtUp;
      await sub.stop();
      return all;
    };
    const stepProcesses = () =>
      [...new Set([workdir, `EPHEMERA_ROUTING_KEY=${tag}`].flatMap((text) => processesMentioning(text).map((p) => p.pid)))];

    let stopping: Promise<void> | undefined;
    return {
      address: `127.0.0.1:${api.port}`,
      iocontext: `127.0.0.1:${io.port}`,
      store, logs, outputs, sandboxes, scratch, tag,
      file: (name, content) => {
        const path = join(scratch, name);
        writeFileSync(path, content);
        return path;
      },
      events,
      waitForEvent: (type, subject, timeoutMs = 20_000) =>
        waitFor(async () => (await events()).find((e) => e.type === type && (subject === undefined || e.subject === subject)),
          { what: `event ${type}${subject ? ` on ${subject}` : ""}`, timeoutMs }),
      stepProcesses,
      stop: () => (stopping ??= (async () => {
        try {
          await stopAll();
          if (!options.stores) await store.close();
          await waitFor(() => stepProcesses().length === 0, { what: "every step process to end", timeoutMs: 10_000 });
        } finally {
          await rm(scratch, { recursive: true, force: true });
          await rm(workdir, { recursive: true, force: true });
        }
      })()),
    };
  } catch (err) {
    await stopAll().catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
    await rm(workdir, { recursive: true, force: true });
    throw err;
  }
}

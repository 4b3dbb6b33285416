// The fault suite's world: its own nats-server and redis-server, ephemera's four services
// as separate processes under a unique prefix, the marker plugin, and what a scenario does
// with them: apply and delete batches of sandboxes, wait until steps run, inject a fault,
// wait for every sandbox to settle, and say precisely what did not.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { Redis } from "ioredis";
import { DeadlineError, waitFor } from "@ephemera/kit";
import { ephAt, ephOk, type Eph } from "../support/eph.js";
import { startOwnNats, startOwnRedis, type OwnServer } from "../support/own-servers.js";
import { processesMentioning, type ProcessInfo } from "../support/processes.js";
import { uniquePrefix } from "../support/servers.js";
import { Services, type ServiceName } from "../support/services.js";
import { freePort } from "../support/stack.js";
import { describeMarker, duplicateRuns, prepareMarkerDir, readMarkers, runningMarkers, type Marker, type MarkerState } from "./markers.js";

const FIXTURES = join(__dirname, "fixtures");
const SCRATCH_ROOT = "/var/tmp";
const OWNER_FILE = "owner.pid";
const RESOURCE = "res";

/** The part of `eph sandbox list -o json` the suite reads. */
export interface SandboxDoc {
  name: string;
  routingKey: string;
  status: { ready: boolean; reason: string; message: string };
  resources: Array<{
    name: string;
    status: string;
    steps?: Array<{ name: string; phase: string; attempt: number; runId?: string; status: string; reason?: string; exitCode?: number }>;
    failure?: { step?: string; reason?: string; message?: string; exitCode?: number; logTail?: string };
  }>;
}

/** A fault that lasts until it is stopped; stop() returns what it did, for the timeline. */
export interface OngoingFault {
  what: string;
  stop(): Promise<string>;
}

export interface Sandbox {
  name: string;
  routingKey?: string;
  /** The last view the API gave of it. */
  last?: SandboxDoc;
  /** No longer listed, last time the suite looked. */
  gone?: boolean;
}

export interface Batch {
  label: string;
  sandboxes: Sandbox[];
}

/** Everything a scenario found wrong, each with its evidence. */
export class Problems {
  readonly items: string[] = [];
  add(text: string): void {
    this.items.push(text);
  }
  throwIfAny(title: string, timeline: string[]): void {
    if (!this.items.length) return;
    throw new Error(
      `${title}: ${this.items.length} problem${this.items.length > 1 ? "s" : ""}\n\n` +
      this.items.map((p, i) => `(${i + 1}) ${p}`).join("\n\n") +
      (timeline.length ? `\n\ntimeline:\n${timeline.map((t) => `  ${t}`).join("\n")}` : ""),
    );
  }
}

export class FaultStack {
  readonly eph: Eph;
  /** Every run id already reported as having run twice, so each is reported once. */
  private readonly reportedDuplicates = new Set<string>();

  private constructor(
    readonly prefix: string,
    readonly scratch: string,
    readonly markerDir: string,
    readonly nats: OwnServer & { url: string },
    readonly redis: OwnServer & { url: string },
    readonly services: Services,
  ) {
    this.eph = ephAt(services.api);
  }

  static async start(): Promise<FaultStack> {
    const prefix = uniquePrefix("faults");
    removeAbandonedScratch();
    // Not under /tmp: every step gets a private /tmp, and the markers must be shared.
    const scratch = mkdtempSync(join(SCRATCH_ROOT, `${prefix}-`));
    writeFileSync(join(scratch, OWNER_FILE), String(process.pid));
    const markerDir = join(scratch, "markers");
    prepareMarkerDir(markerDir);
    const started: Array<{ stop(): Promise<unknown> }> = [];
    try {
      const nats = await startOwnNats(join(scratch, "nats"));
      started.push(nats);
      const redis = await startOwnRedis(join(scratch, "redis"));
      started.push(redis);
      const [apiPort, ioPort] = [await freePort(), await freePort()];
      const services = await Services.start({
        env: {
          NATS_URL: nats.url,
          REDIS_URL: redis.url,
          EPHEMERA_PREFIX: prefix,
          EPHEMERA_API_LISTEN: `127.0.0.1:${apiPort}`,
          EPHEMERA_IOCONTEXT_LISTEN: `127.0.0.1:${ioPort}`,
          EPHEMERA_IOCONTEXT_ADDR: `127.0.0.1:${ioPort}`,
          EPHEMERA_CLUSTER: "local",
          EPHEMERA_SCHEDULER_LISTEN: "127.0.0.1:0",
          EPHEMERA_RUNNER_LISTEN: "127.0.0.1:0",
          EPHEMERA_RUNNER_WORKDIR: join(scratch, "runner"),
          // Faults, not load: enough steps at once for every fault to hit create and delete steps together.
          EPHEMERA_RUNNER_CONCURRENCY: "8",
          // The markers are files on the host, shared with the test: the host stays writable
          // to steps here (sandbox.int.spec.ts and test/security prove the read-only host).
          EPHEMERA_STEP_HOST_READONLY: "false",
          LOG_LEVEL: "info",
        },
      });
      started.push(services);
      const stack = new FaultStack(prefix, scratch, markerDir, nats, redis, services);
      await ephOk(stack.eph, ["plugin", "apply", "-f", join(FIXTURES, "marker-plugin.yaml")]);
      return stack;
    } catch (err) {
      for (const s of started.reverse()) await s.stop().catch(() => undefined);
      rmSync(scratch, { recursive: true, force: true });
      throw err;
    }
  }

  /** Stops the services (SIGTERM), then Redis and NATS, and removes every file of the stack. */
  async stop(): Promise<void> {
    const errors: unknown[] = [];
    for (const part of [this.services, this.redis, this.nats]) await part.stop().catch((err: unknown) => errors.push(err));
    rmSync(this.scratch, { recursive: true, force: true });
    if (errors.length) throw new AggregateError(errors, `stopping the fault stack: ${errors.map((e) => (e as Error).message).join("; ")}`);
  }

  newBatch(label: string, size: number): Batch {
    return { label, sandboxes: Array.from({ length: size }, (_, i) => ({ name: `${label}-${String.fromCharCode(97 + i)}` })) };
  }

  /**
   * Applies the batch, `parallel` `eph` processes at a time: twenty CLIs starting at once
   * on two busy cores can take longer than a call's deadline just to load.
   */
  async apply(batch: Batch, parallel = 4): Promise<void> {
    const queue = [...batch.sandboxes];
    await Promise.all(Array.from({ length: Math.min(parallel, queue.length) }, async () => {
      for (let sb = queue.shift(); sb; sb = queue.shift()) {
        const r = await ephOk(this.eph, [
          "sandbox", "apply", "-f", join(FIXTURES, "marker-sandbox.yaml"), "--set", `name=${sb.name}`, "--set", `markers=${this.markerDir}`,
          "--wait=false",
        ]);
        sb.routingKey = /routing key ([a-z0-9]+)/.exec(r.stdout)?.[1];
      }
    }));
  }

  /**
   * Asks for every sandbox's deletion; with `problems`, a refusal is recorded there instead
   * of thrown. Its teardown steps end only once their gates are open: at once, unless
   * `holdTeardowns` (then openTeardowns, once the fault has hit them running).
   */
  async delete(batch: Batch, problems?: Problems, { holdTeardowns = false } = {}): Promise<void> {
    if (!holdTeardowns) this.openTeardowns(batch);
    await Promise.all(batch.sandboxes.map(async (sb) => {
      try {
        await ephOk(this.eph, ["sandbox", "delete", sb.name, "--wait=false"]);
      } catch (err) {
        if (!problems) throw err;
        problems.add((err as Error).message);
      }
    }));
  }

  /** Lets the teardown steps of the batch's sandboxes end. */
  openTeardowns(batch: Batch): void {
    for (const sb of batch.sandboxes) writeFileSync(join(this.markerDir, "gates", sb.name), "");
  }

  async list(): Promise<SandboxDoc[]> {
    const r = await ephOk(this.eph, ["sandbox", "list", "-o", "json"], { timeoutMs: 10_000 });
    return JSON.parse(r.stdout) as SandboxDoc[];
  }

  markers(): MarkerState {
    return readMarkers(this.markerDir);
  }

  /** Waits until steps of the batches are running at once (script started, not ended); returns them. */
  async stepsRunning(
    wanted: Array<{ batch: Batch; phase: "create" | "delete"; step?: string }>,
    timeoutMs: number,
  ): Promise<Marker[]> {
    const matches = (w: (typeof wanted)[number]) => (m: Marker) =>
      m.phase === w.phase && (!w.step || m.step === w.step) && w.batch.sandboxes.some((s) => s.name === m.sandbox);
    const what = wanted.map((w) => `a ${w.phase} step${w.step ? ` "${w.step}"` : ""} of batch ${w.batch.label}`).join(" and ");
    try {
      return await waitFor(() => {
        const state = this.markers();
        const running = wanted.map((w) => runningMarkers(state, matches(w)));
        return running.every((r) => r.length > 0) && running.flat();
      }, { timeoutMs, intervalMs: 50, what: `${what} running at once` });
    } catch (err) {
      const state = this.markers();
      const related = state.markers.filter((m) => wanted.some((w) => w.batch.sandboxes.some((s) => s.name === m.sandbox)));
      // Their names and routing keys find the steps that ended before their script started.
      const needles = wanted.flatMap((w) => w.batch.sandboxes.flatMap((s) => [`"sandbox":"${s.name}"`, ...(s.routingKey ? [s.routingKey] : [])]));
      throw new Error(
        `${(err as Error).message}; markers of those batches: ${related.map((m) => describeMarker(m, state)).join(", ") || "none"}\n` +
        this.services.grep(needles, { since: Date.now() - timeoutMs, problems: true, max: 30 }),
        { cause: err },
      );
    }
  }

  /**
   * Polls `eph sandbox list` until every sandbox of `ready` is ready and every one of `gone`
   * is no longer listed, or has settled otherwise (ResourceFailed, DeprovisionFailed), or
   * the deadline passes; adds one problem per sandbox that did not end as expected.
   */
  async settle(expect: { ready?: Batch; gone?: Batch }, timeoutMs: number, problems: Problems, since: number): Promise<void> {
    const ready = expect.ready?.sandboxes ?? [];
    const gone = expect.gone?.sandboxes ?? [];
    let lastError: unknown;
    let listed: Map<string, SandboxDoc> | undefined;
    const settled = (now: Map<string, SandboxDoc>) =>
      ready.every((s) => { const v = now.get(s.name); return v && (v.status.ready || v.status.reason === "ResourceFailed"); }) &&
      gone.every((s) => { const v = now.get(s.name); return !v || v.status.reason === "DeprovisionFailed"; });
    try {
      await waitFor(async () => {
        let now: Map<string, SandboxDoc>;
        try {
          now = new Map((await this.list()).map((v) => [v.name, v]));
        } catch (err) {
          lastError = err;
          return false;
        }
        listed = now;
        lastError = undefined;
        for (const s of [...ready, ...gone]) {
          const v = now.get(s.name);
          if (v) { s.last = v; s.routingKey ??= v.routingKey; }
        }
        return settled(now);
      }, { timeoutMs, intervalMs: 750, what: "the sandboxes to settle" });
    } catch (err) {
      if (!(err instanceof DeadlineError)) throw err;
      if (lastError) problems.add(`the API did not answer \`eph sandbox list\` at the end: ${(lastError as Error).message}`);
    }
    if (!listed) return;
    const state = this.markers();
    for (const s of ready) {
      const v = listed.get(s.name);
      if (v?.status.ready) continue;
      problems.add(this.describeStuck(s, v ? `is ${v.status.reason}` : "is not listed", "Ready", state, since, timeoutMs));
    }
    for (const s of gone) {
      const v = listed.get(s.name);
      s.gone = !v;
      if (!v) continue;
      problems.add(this.describeStuck(s, `is still listed as ${v.status.reason}`, "gone (deleted)", state, since, timeoutMs));
    }
  }

  /** For every sandbox of the deleted batch: did its delete step run, and get the create outputs? */
  checkDeleteOutputs(gone: Batch, problems: Problems): void {
    const state = this.markers();
    for (const s of gone.sandboxes) {
      // One still listed was reported by settle(), with its steps and markers.
      if (!s.gone) continue;
      const teardowns = state.markers.filter((m) => m.sandbox === s.name && m.phase === "delete" && m.step === "teardown");
      if (!teardowns.length) {
        problems.add(`sandbox ${s.name} (routing key ${s.routingKey}) is gone, but the script of its delete step "teardown" never ran (markers: ${
          state.markers.filter((m) => m.sandbox === s.name).map((m) => describeMarker(m, state)).join(", ") || "none"})`);
        continue;
      }
      const steps = s.last?.resources.find((r) => r.name === RESOURCE)?.steps ?? [];
      const succeeded = (step: string) => steps.some((st) => st.phase === "create" && st.name === step && st.status === "Succeeded");
      const want: Record<string, string> = {};
      if (succeeded("provision")) want["token"] = `tok-${s.name}-${s.routingKey}`;
      if (succeeded("configure")) want["endpoint"] = `ep-tok-${s.name}-${s.routingKey}`;
      for (const t of teardowns) {
        const wrong = Object.entries(want).filter(([k, v]) => t.fields[k] !== v);
        if (wrong.length) {
          problems.add(`sandbox ${s.name}: delete step run ${t.runId} did not get the create outputs: ${
            wrong.map(([k, v]) => `${k} was "${t.fields[k]}", expected "${v}"`).join("; ")}\n` +
            this.services.grep([t.runId, `${s.routingKey}.${RESOURCE}.create`], { max: 25 }));
        }
      }
    }
  }

  /** Step attempts that started twice (each reported once per suite unless `all`). */
  checkDuplicates(problems: Problems, all = false): void {
    const state = this.markers();
    for (const d of duplicateRuns(state)) {
      if (!all && this.reportedDuplicates.has(d.runId)) continue;
      this.reportedDuplicates.add(d.runId);
      problems.add(`step attempt ${d.runId} (sandbox ${d.sandbox}) ran ${d.times} times: its script started ${d.times} times with the same run id\n` +
        this.services.grep([d.runId], { max: 25 }));
    }
  }

  /**
   * The leftover check finds steps by the prefix in their environment; while `running`
   * steps run it must see them, or it would pass whatever is left behind.
   */
  checkStepProcessesVisible(running: Marker[], problems: Problems): void {
    const seen = processesMentioning(this.prefix);
    if (seen.length) return;
    problems.add(`harness: no process mentions prefix ${this.prefix} while ${running.map((m) => m.runId).join(", ")} run, ` +
      "so the check for leftover step processes would see nothing: do the runner's steps still get the sandbox's params and the work directory?");
  }

  /** No process of a step is left once everything settled. */
  async checkNoStepProcesses(problems: Problems, timeoutMs = 5_000): Promise<void> {
    let left: ProcessInfo[] = [];
    try {
      await waitFor(() => {
        left = processesMentioning(this.prefix);
        return left.length === 0;
      }, { timeoutMs, intervalMs: 200, what: `no step process of prefix ${this.prefix} left` });
    } catch {
      problems.add(`${left.length} process${left.length > 1 ? "es" : ""} of steps still running after every sandbox settled:\n${left.map((p) => {
        const run = p.environ.find((e) => e.startsWith("EPHEMERA_RUN_ID="))
          ?? /"runId":"([^"]+)"/.exec(p.environ.join(" "))?.[0] ?? "run unknown";
        return `  pid ${p.pid} (parent ${p.ppid}) ${run}: ${p.cmdline.slice(0, 200)}`;
      }).join("\n")}`);
    }
  }

  /** Services that died on their own since `since`; `faultAt` tells a crash before the fault from one after. */
  checkCrashes(problems: Problems, since: number, faultAt?: number): void {
    for (const c of this.services.crashesSince(since)) {
      const when = faultAt === undefined ? "" : c.at < faultAt ? ", before this scenario's fault" : ", after this scenario's fault";
      problems.add(`service ${c.service} (pid ${c.pid}) died without being asked to (${c.how}) at ${clock(c.at)}${when}; ` +
        `the harness restarted it. Its last lines:\n${c.tail}`);
    }
  }

  // ---- faults ----

  async killAndRestart(service: ServiceName): Promise<string> {
    const pid = await this.services.kill(service);
    await this.services.start(service);
    return `SIGKILL ${service} (pid ${pid}); restarted as pid ${this.services.pid(service)}`;
  }

  /** SIGKILL, then the service stays down for `ms` (the fault itself) before it is started again. */
  async killFor(service: ServiceName, ms: number): Promise<string> {
    const pid = await this.services.kill(service);
    const down = await stayDown(ms, `${service} outage`);
    await this.services.start(service);
    return `SIGKILL ${service} (pid ${pid}), down for ${seconds(down)} s, restarted as pid ${this.services.pid(service)}`;
  }

  async restartNats(): Promise<string> {
    const pid = this.nats.pid;
    await this.nats.restart();
    return `nats-server (pid ${pid}) stopped with SIGTERM and started again on port ${this.nats.port}, same store (pid ${this.nats.pid})`;
  }

  async flushRedis(): Promise<string> {
    const redis = new Redis(this.redis.url, { maxRetriesPerRequest: 1, connectTimeout: 5_000, lazyConnect: true });
    try {
      await redis.connect();
      const keys = await redis.dbsize();
      await redis.flushall();
      return `FLUSHALL on Redis (${keys} keys removed)`;
    } finally {
      redis.disconnect();
    }
  }

  /**
   * FLUSHALL every `intervalMs` until stopped: a cache that keeps losing everything. stop()
   * says how many flushes ran and how many keys they removed, and throws when no flush
   * succeeded or one failed, since the fault then did not happen as its title says.
   */
  flushRedisEvery(intervalMs: number): OngoingFault {
    const redis = new Redis(this.redis.url, { maxRetriesPerRequest: 1, connectTimeout: 5_000, lazyConnect: true });
    const counts = { flushes: 0, keys: 0, errors: [] as string[] };
    let stopping = false;
    // lazyConnect: the first command connects; a failure to connect counts as a failed flush.
    const loop = (async () => {
      while (!stopping) {
        try {
          counts.keys += await redis.dbsize();
          await redis.flushall();
          counts.flushes++;
        } catch (err) {
          counts.errors.push((err as Error).message);
        }
        // The fault's cadence, not a wait for a condition.
        await delay(intervalMs);
      }
    })();
    return {
      what: `FLUSHALL on Redis every ${intervalMs} ms`,
      stop: async () => {
        stopping = true;
        try {
          await loop;
        } finally {
          redis.disconnect();
        }
        const done = `${counts.flushes} FLUSHALLs on Redis, one every ${intervalMs} ms (${counts.keys} keys removed in all)`;
        if (!counts.flushes || counts.errors.length) {
          throw new Error(`harness: ${done}; ${counts.errors.length} failed: ${[...new Set(counts.errors)].join("; ")}`);
        }
        return done;
      },
    };
  }

  /** Redis down for `ms`: the length of the outage is the fault itself, not a wait for a condition. */
  async redisOutage(ms: number): Promise<string> {
    const pid = this.redis.pid;
    await this.redis.stop();
    const down = await stayDown(ms, "Redis outage");
    await this.redis.start();
    return `Redis (pid ${pid}) stopped for ${seconds(down)} s, started again empty (pid ${this.redis.pid})`;
  }

  /** Step scripts of the batch that started (a marker each), in `phase`. */
  scriptsStarted(batch: Batch, phase: "create" | "delete"): number {
    const names = new Set(batch.sandboxes.map((s) => s.name));
    return this.markers().markers.filter((m) => m.phase === phase && names.has(m.sandbox)).length;
  }

  private describeStuck(s: Sandbox, now: string, expected: string, state: MarkerState, since: number, timeoutMs: number): string {
    const v = s.last;
    const res = v?.resources.find((r) => r.name === RESOURCE);
    const steps = (res?.steps ?? []).map((st) => `${st.phase}/${st.name}${st.attempt ? `#${st.attempt}` : ""} ${st.status}${st.reason ? ` (${st.reason})` : ""}`).join(", ");
    const failure = res?.failure
      ? `\n  failure: step ${res.failure.step} ${res.failure.reason}${res.failure.exitCode !== undefined ? ` exit ${res.failure.exitCode}` : ""}: ${res.failure.message}` +
        (res.failure.logTail ? `\n  log tail: ${res.failure.logTail.trim().split("\n").slice(-4).join(" | ")}` : "")
      : "";
    const markers = state.markers.filter((m) => m.sandbox === s.name).map((m) => describeMarker(m, state)).join(", ");
    const needles = [s.name, ...(s.routingKey ? [s.routingKey] : [])];
    return `sandbox ${s.name} (routing key ${s.routingKey ?? "?"}) ${now}, expected ${expected} within ${Math.round(timeoutMs / 1000)} s` +
      (v ? `\n  status: ${v.status.reason}: ${v.status.message}; resource ${res?.name}: ${res?.status}` : "") +
      `\n  steps: ${steps || "none"}${failure}\n  markers: ${markers || "none"}` +
      `\n  service log lines about it:\n${this.services.grep(needles, { since, max: 25 }) || "  (none)"}`;
  }
}

/**
 * The scratch directories of runs whose test process is gone (a jest killed before its
 * afterAll): their servers died with it (parent-death signal), their files stay until here.
 */
function removeAbandonedScratch(): void {
  for (const dir of readdirSync(SCRATCH_ROOT)) {
    if (!dir.startsWith("faults")) continue;
    const path = join(SCRATCH_ROOT, dir);
    let owner: number;
    try {
      owner = Number(readFileSync(join(path, OWNER_FILE), "utf8"));
    } catch {
      continue; // not one of ours, or being created
    }
    if (!alive(owner)) rmSync(path, { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Lets `ms` pass (an outage's length is the fault itself); returns how long it really took. */
async function stayDown(ms: number, what: string): Promise<number> {
  const down = Date.now();
  await waitFor(() => Date.now() - down >= ms, { timeoutMs: ms + 5_000, intervalMs: 100, what: `the ${ms} ms ${what} to pass` });
  return Date.now() - down;
}

const seconds = (ms: number) => Math.round(ms / 1000);

export const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);

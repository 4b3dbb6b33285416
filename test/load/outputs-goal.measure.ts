// pnpm test:outputs: is Redis only a cache? With no fault, then under each fault, 20
// sandboxes are created on a fresh fault stack (own NATS and Redis, the services as
// processes, the marker plugin, whose steps read each other's outputs) while the fault hits
// their steps; every one must become ready. Prints, per run, sandboxes ready / failed, step
// attempts and wall time; fails when a sandbox did not become ready. Not part of
// `pnpm test` (see jest.config.cjs).
import { loadavg } from "node:os";
import { FaultStack, Problems, clock, type Batch, type OngoingFault } from "../faults/fault-stack.js";

const SANDBOXES = 20;
/** Create steps of the marker plugin: provision, configure (reads provision's token), verify (reads both). */
const CREATE_STEPS = 3;
const STEPS_RUNNING_MS = 60_000;
const SETTLE_MS = 90_000;

interface Fault {
  label: string;
  title: string;
  /** Lasts the whole run: started before the sandboxes are applied, stopped once they settled. */
  ongoing?: (stack: FaultStack) => OngoingFault;
  /** Injected once create steps of the batch run; returns what it did. */
  fault?: (stack: FaultStack) => Promise<string>;
}

const FAULTS: Fault[] = [
  { label: "base", title: "no fault (baseline)" },
  { label: "flush", title: "Redis FLUSHALL every 100 ms for the whole run", ongoing: (s) => s.flushRedisEvery(100) },
  { label: "redis", title: "Redis stopped for 20 s while steps run, then started again (empty)", fault: (s) => s.redisOutage(20_000) },
  { label: "io", title: "IO context SIGKILLed while steps run, down 8 s, then restarted", fault: (s) => s.killFor("iocontext", 8_000) },
];

interface Figures {
  title: string;
  ready: number;
  failed: number;
  unsettled: number;
  attempts: number;
  scripts: number;
  /** From the first apply to every sandbox settled; `applyMs` of it went to applying them (4 CLIs at a time). */
  wallMs: number;
  applyMs: number;
  hit?: number;
  /** The machine's 1-minute load average at the end: on a shared 2-core machine, the context of the times. */
  load: number;
}

const results: Figures[] = [];

describe(`outputs goal: ${SANDBOXES} creates under each Redis and IO context fault, 0 failed`, () => {
  afterAll(() => {
    if (!results.length) return;
    console.info([
      `${SANDBOXES} creates per fault, ${SANDBOXES * CREATE_STEPS} create steps without retries`,
      ...results.map((r) => `${r.title}: ${r.ready} ready, ${r.failed} failed${r.unsettled ? `, ${r.unsettled} not settled` : ""}` +
        `${r.hit === undefined ? "" : ` (${r.hit} still being created when the fault began)`}; ` +
        `${r.attempts} step attempts (${r.scripts} scripts started); ${s(r.wallMs)} s (apply ${s(r.applyMs)} s), load ${r.load.toFixed(1)}`),
    ].join("\n"));
  });

  for (const f of FAULTS) {
    it(f.title, async () => {
      const stack = await FaultStack.start();
      const timeline: string[] = [];
      const note = (line: string) => timeline.push(`${clock(Date.now())} ${line}`);
      const problems = new Problems();
      const batch = stack.newBatch(f.label, SANDBOXES);
      let ongoing: OngoingFault | undefined;
      let faultAt: number | undefined;
      const started = Date.now();
      let applyMs: number | undefined;
      /** Sandboxes still being created when the fault began. */
      let hit: number | undefined;
      try {
        if (f.ongoing) {
          faultAt = Date.now();
          hit = SANDBOXES;
          ongoing = f.ongoing(stack);
          note(`fault started: ${ongoing.what}`);
        }
        try {
          // The fault comes with the first running step, while the rest are still being applied.
          const applying = stack.apply(batch).then(() => {
            applyMs = Date.now() - started;
            note(`applied ${SANDBOXES} sandboxes`);
          });
          applying.catch(() => undefined); // awaited below, where its error is thrown
          try {
            const running = await stack.stepsRunning([{ batch, phase: "create" }], STEPS_RUNNING_MS);
            note(`steps running: ${running.map((m) => m.runId).join(", ")}`);
            if (f.fault) {
              faultAt = Date.now();
              hit = creating(stack, batch);
              note(`fault done: ${await f.fault(stack)}`);
            }
          } finally {
            await applying;
          }
          await stack.settle({ ready: batch }, SETTLE_MS, problems, started);
          note("settled (or deadline)");
        } finally {
          if (ongoing) note(`fault stopped: ${await ongoing.stop()}`);
        }
        const wallMs = Date.now() - started;
        stack.checkDuplicates(problems);
        stack.checkCrashes(problems, started, faultAt);
        const figures = { title: f.title, wallMs, applyMs: applyMs ?? wallMs, hit, load: loadavg()[0] ?? 0, ...count(batch), scripts: stack.scriptsStarted(batch, "create") };
        results.push(figures);
        console.info(`${f.title}: ${figures.ready} ready, ${figures.failed} failed, ${figures.attempts} step attempts, ` +
          `${s(wallMs)} s\n${timeline.join("\n")}`);
        problems.throwIfAny(f.title, timeline);
      } finally {
        await stack.stop();
      }
    }, STEPS_RUNNING_MS + SETTLE_MS + 60_000);
  }
});

/** Sandboxes whose last create step (verify) has not ended yet: not applied, waiting or running. */
function creating(stack: FaultStack, batch: Batch): number {
  const state = stack.markers();
  const done = new Set(state.markers.filter((m) => m.step === "verify" && state.done.has(m.runId)).map((m) => m.sandbox));
  return batch.sandboxes.filter((sb) => !done.has(sb.name)).length;
}

const s = (ms: number) => (ms / 1000).toFixed(1);

/** Outcomes from the last `eph sandbox list`, and the attempts of create steps it reports (an attempt number per step). */
function count(batch: Batch): Pick<Figures, "ready" | "failed" | "unsettled" | "attempts"> {
  let ready = 0, failed = 0, attempts = 0;
  for (const s of batch.sandboxes) {
    if (s.last?.status.ready) ready++;
    else if (s.last?.status.reason === "ResourceFailed") failed++;
    for (const r of s.last?.resources ?? []) for (const st of r.steps ?? []) if (st.phase === "create") attempts += st.attempt;
  }
  return { ready, failed, unsettled: batch.sandboxes.length - ready - failed, attempts };
}

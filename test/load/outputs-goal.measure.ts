// pnpm test:outputs: is Redis only a cache? With no fault, then under each fault, 20
// sandboxes are created on a fresh fault stack (own NATS and Redis, the services as
// processes, the marker plugin, whose steps read each other's outputs) while the fault hits
// their steps; every one must become ready. Prints, per run, sandboxes ready / failed, step
// attempts and wall time; fails when a sandbox did not become ready. Not part of
// `pnpm test` (see jest.config.cjs).
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
  wallMs: number;
}

const results: Figures[] = [];

describe(`outputs goal: ${SANDBOXES} creates under each Redis and IO context fault, 0 failed`, () => {
  afterAll(() => {
    if (!results.length) return;
    console.info([
      `${SANDBOXES} creates per fault, ${SANDBOXES * CREATE_STEPS} create steps without retries`,
      ...results.map((r) => `${r.title}: ${r.ready} ready, ${r.failed} failed${r.unsettled ? `, ${r.unsettled} not settled` : ""}; ` +
        `${r.attempts} step attempts (${r.scripts} scripts started); ${(r.wallMs / 1000).toFixed(1)} s`),
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
      try {
        if (f.ongoing) {
          faultAt = Date.now();
          ongoing = f.ongoing(stack);
          note(`fault started: ${ongoing.what}`);
        }
        try {
          await stack.apply(batch);
          note(`applied ${SANDBOXES} sandboxes`);
          const running = await stack.stepsRunning([{ batch, phase: "create" }], STEPS_RUNNING_MS);
          note(`steps running: ${running.map((m) => m.runId).join(", ")}`);
          if (f.fault) {
            faultAt = Date.now();
            note(`fault done: ${await f.fault(stack)}`);
          }
          await stack.settle({ ready: batch }, SETTLE_MS, problems, started);
          note("settled (or deadline)");
        } finally {
          if (ongoing) note(`fault stopped: ${await ongoing.stop()}`);
        }
        const wallMs = Date.now() - started;
        stack.checkDuplicates(problems);
        stack.checkCrashes(problems, started, faultAt);
        const figures = { title: f.title, wallMs, ...count(batch), scripts: stack.scriptsStarted(batch, "create") };
        results.push(figures);
        console.info(`${f.title}: ${figures.ready} ready, ${figures.failed} failed, ${figures.attempts} step attempts, ` +
          `${(wallMs / 1000).toFixed(1)} s\n${timeline.join("\n")}`);
        problems.throwIfAny(f.title, timeline);
      } finally {
        await stack.stop();
      }
    }, STEPS_RUNNING_MS + SETTLE_MS + 60_000);
  }
});

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

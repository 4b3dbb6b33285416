// Every service of `pnpm start` serves /metrics in the Prometheus text format, on a port of
// its own, and the series that describe a sandbox's life move when one is created.
import { waitFor } from "@ephemera/kit";
import { scrape, total, type Exposition } from "../support/prometheus.js";
import { startTestStack, type TestStack } from "../support/stack.js";

const SERVICES = ["sandbox", "scheduler", "runner", "iocontext", "tunnel", "console"] as const;
type Service = (typeof SERVICES)[number];

// Two create steps (the second reads the first's output, planned in its dispatch: no IO-context call) and one delete step.
const PLUGIN = `
name: metered@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: first
    outputs: [{name: word, valueFromPath: /tmp/word}]
    script: |
      #!/usr/bin/env bash
      printf hello > /tmp/word
  - name: second
    inputs: [{name: word, valueFromStep: {name: first, output: word}}]
    script: |
      #!/usr/bin/env bash
      echo "got $WORD"
  delete:
  - name: cleanup
    script: |
      #!/usr/bin/env bash
      echo bye
`;
const SANDBOX = `
name: metered-sb
spec:
  cluster: local
  resources:
  - {name: res, plugin: metered}
`;

/** Each service's metrics address, from its "metrics listening" log line (the stack gives each a free port). */
function metricsAddresses(stack: TestStack): Partial<Record<Service, string>> {
  const found: Partial<Record<Service, string>> = {};
  for (const line of stack.output) {
    if (!line.includes("metrics listening")) continue;
    const rec = JSON.parse(line) as { name?: Service; port?: number };
    if (rec.name && rec.port) found[rec.name] = `127.0.0.1:${rec.port}`;
  }
  return found;
}

describe("metrics", () => {
  let stack: TestStack;
  let at: Record<Service, string>;
  beforeAll(async () => {
    stack = await startTestStack("metrics");
    at = await waitFor(() => {
      const found = metricsAddresses(stack);
      return SERVICES.every((s) => found[s]) && (found as Record<Service, string>);
    }, { timeoutMs: 15_000, what: "every service's metrics port in the log" });
  }, 60_000);
  afterAll(async () => { await stack?.stop(); });

  const scrapeAll = async () =>
    Object.fromEntries(await Promise.all(SERVICES.map(async (s) => [s, await scrape(at[s])] as const))) as Record<Service, Exposition>;

  it("serves each service's metrics in the text format, on six different ports, its process metrics labelled with it", async () => {
    expect(new Set(Object.values(at)).size).toBe(6);
    // A service serves /metrics from its first moments; its own series appear once it has started.
    const all = await waitFor(async () => {
      const got = await scrapeAll();
      return got.runner.types.has("ephemera_runner_steps_running") && got.scheduler.types.has("ephemera_scheduler_workflows_started_total") && got;
    }, { timeoutMs: 15_000, what: "the runner and the scheduler to have started" });
    for (const s of SERVICES) {
      expect(all[s].types.get("process_cpu_user_seconds_total")).toBe("counter");
      // The tunnel appends only for sessions: its event-store series come with the first. The console has no store.
      if (s !== "tunnel" && s !== "console") expect(all[s].types.get("ephemera_eventstore_append_duration_seconds")).toBe("histogram");
      expect(all[s].samples.find((x) => x.name === "process_resident_memory_bytes")?.labels).toEqual({ service: s });
    }
    expect(all.sandbox.types.get("ephemera_grpc_server_requests_total")).toBe("counter");
    expect(all.tunnel.types.get("ephemera_tunnel_sessions_open")).toBe("gauge");
    expect(all.runner.types.get("ephemera_runner_steps_running")).toBe("gauge");
    expect(all.runner.types.get("ephemera_runner_step_duration_seconds")).toBe("histogram");
    expect(all.scheduler.types.get("ephemera_scheduler_workflow_duration_seconds")).toBe("histogram");
    // The work queue's backlog, read from JetStream at the scrape.
    expect(total(all.runner, "ephemera_runner_queue_pending", { cluster: "local", lane: "start" })).toBe(0);
    const res = await fetch(`http://${at.runner}/other`);
    expect(res.status).toBe(404);
  });

  it("counts a sandbox's API call, steps, workflow, IO-context calls and appends as it is created", async () => {
    const before = await scrapeAll();
    const appends = (e: Exposition) => total(e, "ephemera_eventstore_append_duration_seconds_count", { outcome: "ok" });
    const grown = (after: Record<Service, Exposition>) => ({
      apply: total(after.sandbox, "ephemera_grpc_server_requests_total", { grpc_service: "ephemera.v1.SandboxService", method: "Apply", code: "OK" })
        - total(before.sandbox, "ephemera_grpc_server_requests_total", { grpc_service: "ephemera.v1.SandboxService", method: "Apply", code: "OK" }),
      started: total(after.runner, "ephemera_runner_steps_started_total") - total(before.runner, "ephemera_runner_steps_started_total"),
      succeeded: total(after.runner, "ephemera_runner_steps_succeeded_total") - total(before.runner, "ephemera_runner_steps_succeeded_total"),
      stepDurations: total(after.runner, "ephemera_runner_step_duration_seconds_count", { outcome: "succeeded" })
        - total(before.runner, "ephemera_runner_step_duration_seconds_count", { outcome: "succeeded" }),
      running: total(after.runner, "ephemera_runner_steps_running"),
      workflows: total(after.scheduler, "ephemera_scheduler_workflow_duration_seconds_count", { phase: "create", outcome: "succeeded" })
        - total(before.scheduler, "ephemera_scheduler_workflow_duration_seconds_count", { phase: "create", outcome: "succeeded" }),
      dispatched: total(after.scheduler, "ephemera_scheduler_steps_dispatched_total", { phase: "create" })
        - total(before.scheduler, "ephemera_scheduler_steps_dispatched_total", { phase: "create" }),
      inputsServed: total(after.iocontext, "ephemera_grpc_server_requests_total", { method: "GetStepInputs", code: "OK" })
        - total(before.iocontext, "ephemera_grpc_server_requests_total", { method: "GetStepInputs", code: "OK" }),
      inputsAsked: total(after.runner, "ephemera_grpc_client_requests_total", { method: "GetStepInputs", code: "OK" })
        - total(before.runner, "ephemera_grpc_client_requests_total", { method: "GetStepInputs", code: "OK" }),
      inputsFromDispatch: total(after.runner, "ephemera_runner_step_inputs_total", { from: "dispatch" })
        - total(before.runner, "ephemera_runner_step_inputs_total", { from: "dispatch" }),
      appendedBy: SERVICES.filter((s) => appends(after[s]) > appends(before[s])).sort(),
      ready: total(after.sandbox, "ephemera_sandboxes", { reason: "Ready" }),
    });

    for (const [name, text] of [["plugin.yaml", PLUGIN], ["sandbox.yaml", SANDBOX]] as const) {
      const r = await stack.eph([name === "plugin.yaml" ? "plugin" : "sandbox", "apply", "-f", stack.file(name, text)]);
      expect(r).toMatchObject({ code: 0 });
    }
    // A scrape after the sandbox is ready may still miss the last step's record: wait for it, with a deadline.
    const want = {
      apply: 1, started: 2, succeeded: 2, stepDurations: 2, running: 0, workflows: 1, dispatched: 2, inputsServed: 0, inputsAsked: 0, inputsFromDispatch: 2,
      appendedBy: ["runner", "sandbox", "scheduler"], ready: 1,
    };
    let last: ReturnType<typeof grown> | undefined;
    await waitFor(async () => {
      last = grown(await scrapeAll());
      return JSON.stringify(last) === JSON.stringify(want);
    }, { timeoutMs: 15_000, intervalMs: 200, what: "the metrics of one sandbox created" }).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: last seen ${JSON.stringify(last)}`, { cause: err });
    });
    expect(last).toEqual(want);
  }, 60_000);
});

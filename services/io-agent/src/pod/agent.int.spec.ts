// ephemera-agent as a runner pod runs it: the bundle (dist/agent.cjs, built by
// scripts/bundle-agent.mjs into a temporary directory) as the init and sidecar processes,
// the entrypoint under sh between them, against a real IO context on NATS with the
// runner's signing key. No value and no token may appear in what the agent prints.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, type DomainEvent } from "@ephemera/events";
import { connectNats, JetStreamEventStore, JetStreamValueStore, type EventStore } from "@ephemera/eventstore";
import { InMemoryOutputStore, start as startIOContext, type RunningIOContext } from "@ephemera/iocontext";
import { createLogger, signCapability, signingKey, stepCapability, waitFor } from "@ephemera/kit";
import { TEST_KEY, tokenForStep } from "../../../../test/support/keys.js";
import { testNats } from "../../../../test/support/servers.js";
import { freePort } from "../../../../test/support/stack.js";
import { fetchStepOutputs, ioContextClient } from "../client.js";
import { parseStepReport, type StepReport } from "../report.js";
import { agentPaths } from "./layout.js";
import { run, start, stderrShows, type Ended } from "./process.testkit.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const ROOT = join(__dirname, "..", "..", "..", "..");
const SECRET = "pw-7f3e'9\"$x";
const PARAMS = { "db-name": "orders", password: SECRET, config: "a=1\n" };
const BASE_ENV = { PATH: process.env["PATH"] };

interface Step {
  dir: string;
  agentDir: string;
  runId: string;
  token: string;
  step: pb.Step;
}

describe("ephemera-agent against a real IO context", () => {
  let work: string;
  let agent: string;
  let nc: NatsConnection;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let prefix: string;
  let store: EventStore;
  let values: JetStreamValueStore;
  const outputs = new InMemoryOutputStore();
  let iocontext: RunningIOContext;
  let address: string;
  let n = 0;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "ephemera-agent-"));
    agent = join(work, "agent.cjs");
    const built = spawnSync(process.execPath, [join(ROOT, "scripts", "bundle-agent.mjs"), "--outfile", agent], { encoding: "utf8" });
    if (built.status !== 0) throw new Error(`bundle-agent.mjs failed: ${built.stderr}`);
    const t = testNats("agent");
    prefix = t.prefix;
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "agent-test");
    store = await JetStreamEventStore.open(nc, { prefix });
    values = await JetStreamValueStore.open(nc, prefix);
    iocontext = await serve("127.0.0.1:0");
    address = `127.0.0.1:${iocontext.port}`;
  }, 60_000);

  afterAll(async () => {
    await iocontext?.stop();
    if (nc) { await cleanupStreams(nc); await nc.close(); }
    await rm(work, { recursive: true, force: true });
  });

  const serve = (listen: string) => startIOContext({ listen, prefix, keys: [TEST_KEY] }, { store, values, outputs, logger: createLogger("iocontext", "silent") });

  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) =>
    store.append(aggregate, id, await store.read(aggregate, id), events.map(encode), { source: "test" });

  /** A plugin of one step (its script given the step's directory), published, its run dispatched and started as the runner would. */
  async function dispatch(script: (dir: string) => string): Promise<Step> {
    n += 1;
    const dir = await mkdtemp(join(work, `step${n}-`));
    const step = pb.Step.fromPartial({
      name: "provision",
      script: script(dir),
      inputs: [
        { name: "db-name", valueFromSandbox: true },
        { name: "password", valueFromSandbox: true, as: { env: "PASSWORD", path: `${dir}/in/password` } },
        { name: "config", valueFromSandbox: true, as: { env: "", path: `${dir}/in/config` } },
      ],
      outputs: [{ name: "host", valueFromPath: `${dir}/out/host` }, { name: "echo", valueFromPath: `${dir}/out/echo` }],
    });
    const plugin = `agent-test-${n}`;
    const workflowId = `rk${String(n).padStart(4, "0")}.db.create`;
    const runId = `${workflowId}.provision.1`;
    await append(Aggregates.plugin, plugin, ev("ephemera.plugin.published.v1", { name: plugin, version: "1.0.0", spec: { create: [step] } }));
    await append(Aggregates.workflow, workflowId,
      ev("ephemera.workflow.started.v1", {
        workflowId, sandbox: `sb-${n}`, routingKey: `rk${String(n).padStart(4, "0")}`, resource: "db", phase: "create",
        plugin, version: "1.0.0", cluster: "local", params: PARAMS,
      }),
      ev("ephemera.workflow.step_dispatched.v1", { step: "provision", runId, attempt: 1 }));
    await append(Aggregates.steprun, runId, ev("ephemera.steprun.started.v1", { runId, workflowId, step: "provision", attempt: 1 }));
    return { dir, agentDir: join(dir, "agent"), runId, token: await tokenForStep(runId, step), step };
  }

  const env = (s: Step, more: Record<string, string> = {}) => ({
    ...BASE_ENV, EPHEMERA_RUN_ID: s.runId, EPHEMERA_TOKEN: s.token, EPHEMERA_IOCONTEXT: address, EPHEMERA_AGENT_DIR: s.agentDir, ...more,
  });
  const init = (s: Step, more?: Record<string, string>) => run(process.execPath, [agent, "init"], env(s, more));
  const entrypoint = (s: Step) => run("sh", [agentPaths(s.agentDir).entrypoint], BASE_ENV);
  const sidecar = (s: Step, more?: Record<string, string>) => start(process.execPath, [agent, "sidecar"], env(s, more));
  const report = async (s: Step): Promise<StepReport | undefined> => parseStepReport(await readFile(agentPaths(s.agentDir).report, "utf8"));
  const stored = async (s: Step) => {
    const client = ioContextClient(address);
    try {
      return Object.fromEntries((await fetchStepOutputs(client, s.runId, s.token, { retry: false })).map((o) => [o.name, o.value.toString()]));
    } finally {
      client.close();
    }
  };
  /** Nothing the agent printed holds a value or the token. */
  const noSecrets = (s: Step, ...ended: Array<Pick<Ended, "stdout" | "stderr">>) => {
    for (const e of ended) for (const text of [e.stdout, e.stderr]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(s.token);
    }
  };

  const WRITES_OUTPUTS = (dir: string) =>
    `#!/bin/sh\nset -e\nmkdir -p ${dir}/out\nprintf 'db-%s' "$DB_NAME" > ${dir}/out/host\n` +
    `{ printf '%s|' "$PASSWORD"; cat ${dir}/in/password; printf '|'; cat ${dir}/in/config; } > ${dir}/out/echo\n`;

  it("runs a step as a pod would: init writes the entrypoint, env, script and input files; the sidecar waits, then stores the outputs and reports", async () => {
    const s = await dispatch(WRITES_OUTPUTS);
    const prepared = await init(s);
    expect(prepared.code).toBe(0);
    expect(prepared.stderr).toContain("step prepared: 3 input(s) present, 2 file(s) written, 2 output(s) declared");
    const paths = agentPaths(s.agentDir);
    expect((await stat(paths.entrypoint)).mode & 0o777).toBe(0o755);
    expect((await stat(paths.script)).mode & 0o777).toBe(0o755);
    // Readable by main, which may run as another user than the agent (its image's, or its overlay's runAsUser).
    expect((await stat(paths.env)).mode & 0o777).toBe(0o644);
    expect((await stat(`${s.dir}/in/password`)).mode & 0o777).toBe(0o644);
    expect(await readFile(`${s.dir}/in/config`, "utf8")).toBe("a=1\n");
    expect(JSON.parse(await readFile(paths.outputs, "utf8"))).toEqual([
      { name: "host", path: `${s.dir}/out/host` }, { name: "echo", path: `${s.dir}/out/echo` },
    ]);

    // The sidecar starts with main and waits for it, saying so.
    const termination = join(s.dir, "termination-log");
    const side = sidecar(s, { EPHEMERA_WAIT_NOTICE_MS: "20", EPHEMERA_TERMINATION_MESSAGE_PATH: termination });
    await stderrShows(side, `waiting for the script in the main container to end (no ${paths.exitCode} yet`);
    const main = await entrypoint(s);
    expect(main.code).toBe(0);
    const ended = await side.ended();
    expect(ended.code).toBe(0);
    expect(ended.stderr).toContain("stored 2 output(s): host (9 bytes), echo");

    const echo = `${SECRET}|${SECRET}|a=1\n`;
    expect(await report(s)).toEqual({
      outcome: "succeeded",
      outputs: [
        { name: "host", size: 9, base64: Buffer.from("db-orders").toString("base64") },
        { name: "echo", size: Buffer.byteLength(echo), base64: Buffer.from(echo).toString("base64") },
      ],
    });
    expect((await stat(paths.report)).mode & 0o777).toBe(0o600);
    // What the Kubernetes driver reads from the pod's status: names and sizes, no values.
    expect(JSON.parse(await readFile(termination, "utf8"))).toEqual({
      outcome: "succeeded", outputs: [{ name: "host", size: 9 }, { name: "echo", size: Buffer.byteLength(echo) }],
    });
    expect(await stored(s)).toEqual({ host: "db-orders", echo });
    noSecrets(s, prepared, main, ended);
  });

  it("reports a script's non-zero exit code and stores nothing", async () => {
    const s = await dispatch((dir) => `#!/bin/sh\nmkdir -p ${dir}/out\necho x > ${dir}/out/host\nexit 3\n`);
    expect((await init(s)).code).toBe(0);
    expect((await entrypoint(s)).code).toBe(3);
    const termination = join(s.dir, "termination-log");
    expect((await sidecar(s, { EPHEMERA_TERMINATION_MESSAGE_PATH: termination }).ended()).code).toBe(0);
    expect(await report(s)).toEqual({ outcome: "failed", reason: "Error", exitCode: 3, message: "script exited with code 3" });
    expect(JSON.parse(await readFile(termination, "utf8"))).toEqual(await report(s));
    expect(await stored(s)).toEqual({});
  });

  it("reports a script killed by a signal as such", async () => {
    const s = await dispatch(() => "#!/bin/sh\nkill -KILL $$\n");
    expect((await init(s)).code).toBe(0);
    expect((await entrypoint(s)).code).toBe(137);
    expect((await sidecar(s).ended()).code).toBe(0);
    expect(await report(s)).toEqual({ outcome: "failed", reason: "Error", exitCode: 137, message: "script killed by SIGKILL (exit code 137)" });
  });

  it("fails with OutputMissing, naming the output a script that exited 0 did not write", async () => {
    const s = await dispatch((dir) => `#!/bin/sh\nmkdir -p ${dir}/out\necho x > ${dir}/out/host\n`);
    expect((await init(s)).code).toBe(0);
    expect((await entrypoint(s)).code).toBe(0);
    const ended = await sidecar(s).ended();
    expect(ended.code).toBe(0);
    expect(await report(s)).toEqual({ outcome: "failed", reason: "OutputMissing", message: `output "echo": the script did not write ${s.dir}/out/echo` });
    expect(ended.stderr).toContain("step failed (OutputMissing)");
    expect(await stored(s)).toEqual({});
  });

  it("fails with OutputTooLarge, naming the output over 1 MiB and its size", async () => {
    const s = await dispatch((dir) => `#!/bin/sh\nmkdir -p ${dir}/out\necho x > ${dir}/out/host\nhead -c 1048577 /dev/zero > ${dir}/out/echo\n`);
    expect((await init(s)).code).toBe(0);
    expect((await entrypoint(s)).code).toBe(0);
    expect((await sidecar(s).ended()).code).toBe(0);
    expect(await report(s)).toEqual({
      outcome: "failed", reason: "OutputTooLarge", message: `output "echo": ${s.dir}/out/echo is 1048577 bytes, over the 1048576-byte limit`,
    });
  });

  it("refuses a forged token (read from EPHEMERA_TOKEN_FILE) with a clear error, never printing it, and reports InputUnavailable", async () => {
    const s = await dispatch(WRITES_OUTPUTS);
    const forger = signingKey(Buffer.from("a key that is not the runner's, long enough to sign"));
    const forged = await signCapability(forger, stepCapability(s.runId, s.step), 3_600_000);
    const tokenFile = join(s.dir, "token");
    await writeFile(tokenFile, `${forged}\n`, { mode: 0o600 });
    const ended = await run(process.execPath, [agent, "init"], { ...env(s), EPHEMERA_TOKEN: "", EPHEMERA_TOKEN_FILE: tokenFile });
    expect(ended.code).toBe(1);
    expect(ended.stderr).toContain(`the IO context refused the token of run ${s.runId}`);
    expect(ended.stderr).not.toContain(forged);
    const r = await report(s);
    expect(r).toMatchObject({ outcome: "failed", reason: "InputUnavailable", message: expect.stringContaining("refused the token") });
    expect(existsSync(agentPaths(s.agentDir).env)).toBe(false);
    expect(existsSync(agentPaths(s.agentDir).script)).toBe(false);
  });

  it("rides out an IO context that is down when the sidecar stores, and stores once it is back", async () => {
    const s = await dispatch(WRITES_OUTPUTS);
    expect((await init(s)).code).toBe(0);
    expect((await entrypoint(s)).code).toBe(0);
    // Nothing listens on this port until the sidecar has said it retries.
    const later = `127.0.0.1:${await freePort()}`;
    const side = sidecar(s, { EPHEMERA_IOCONTEXT: later, EPHEMERA_IO_RETRY_MS: "30000" });
    await stderrShows(side, /cannot store the outputs: .*; retry 2 in/);
    const back = await serve(later);
    try {
      const ended = await side.ended();
      expect(ended.code).toBe(0);
      expect(ended.stderr).toContain("stored 2 output(s)");
      expect(await report(s)).toMatchObject({ outcome: "succeeded" });
      expect(await stored(s)).toEqual({ host: "db-orders", echo: `${SECRET}|${SECRET}|a=1\n` });
      noSecrets(s, ended);
    } finally {
      await back.stop();
    }
  });

  it("rides out an IO context that is down when init starts, and prepares the step once it is up", async () => {
    const s = await dispatch(WRITES_OUTPUTS);
    const later = `127.0.0.1:${await freePort()}`;
    const starting = start(process.execPath, [agent, "init"], env(s, { EPHEMERA_IOCONTEXT: later, EPHEMERA_IO_RETRY_MS: "30000" }));
    await stderrShows(starting, /cannot get the step's inputs: .*; retry 2 in/);
    const up = await serve(later);
    try {
      const ended = await starting.ended();
      expect(ended.code).toBe(0);
      expect(existsSync(agentPaths(s.agentDir).script)).toBe(true);
      noSecrets(s, ended);
    } finally {
      await up.stop();
    }
  });

  it("reports a step stopped with the pod as Cancelled, with the exit code the entrypoint recorded, and stores nothing", async () => {
    const s = await dispatch((dir) => `#!/bin/sh\nmkdir -p ${dir}/out\necho x > ${dir}/out/host\necho x > ${dir}/out/echo\necho ready > ${dir}/ready\nexec sleep 60\n`);
    expect((await init(s)).code).toBe(0);
    const side = sidecar(s, { EPHEMERA_WAIT_NOTICE_MS: "20" });
    await stderrShows(side, "waiting for the script");
    const main = start("sh", [agentPaths(s.agentDir).entrypoint], BASE_ENV);
    await waitFor(() => existsSync(`${s.dir}/ready`), { timeoutMs: 10_000, what: "the script to start" });
    // Pod deletion: every container gets SIGTERM.
    side.kill("SIGTERM");
    main.kill("SIGTERM");
    expect((await main.ended()).code).toBe(143);
    expect((await side.ended()).code).toBe(0);
    expect(await report(s)).toEqual({ outcome: "failed", reason: "Cancelled", exitCode: 143, message: "the step was stopped" });
    expect(await stored(s)).toEqual({});
  });

  it("gives up waiting for an exit code after EPHEMERA_WAIT_TIMEOUT_MS and reports the missing file", async () => {
    const s = await dispatch(WRITES_OUTPUTS);
    expect((await init(s)).code).toBe(0);
    const ended = await sidecar(s, { EPHEMERA_WAIT_TIMEOUT_MS: "200" }).ended();
    expect(ended.code).toBe(0);
    expect(await report(s)).toEqual({
      outcome: "failed", reason: "DriverError",
      message: `the main container recorded no exit code in ${agentPaths(s.agentDir).exitCode} within 200 ms (does it run ${agentPaths(s.agentDir).entrypoint}?)`,
    });
  });

  it("names every missing setting and exits 2 without calling anything; --check reads the configuration only", async () => {
    const missing = await run(process.execPath, [agent, "init"], { ...BASE_ENV, EPHEMERA_TOKEN_FILE: join(work, "nope") });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("EPHEMERA_RUN_ID is not set");
    expect(missing.stderr).toContain("EPHEMERA_IOCONTEXT is not set");
    expect(missing.stderr).toContain(`EPHEMERA_TOKEN_FILE: cannot read ${join(work, "nope")}: ENOENT`);

    const checked = await run(process.execPath, [agent, "sidecar", "--check"], {
      ...BASE_ENV, EPHEMERA_RUN_ID: "rk9999.db.create.provision.1", EPHEMERA_TOKEN: "tok-3c1d", EPHEMERA_IOCONTEXT: "127.0.0.1:1",
    });
    expect(checked.code).toBe(0);
    expect(checked.stderr).toContain("configuration read: run rk9999.db.create.provision.1, IO context 127.0.0.1:1 (plaintext), agent directory /ephemera");
    expect(checked.stderr).not.toContain("tok-3c1d");
    expect((await run(process.execPath, [agent, "launch"], BASE_ENV)).code).toBe(2);
  });
});

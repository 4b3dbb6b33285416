// `eph logs` while the steps run: lines printed before a step ends (the step waits on a
// gate the test opens only once it has seen them), followed runs, JSON lines, --since, a
// deleted sandbox's logs, and the bound on a step's log.
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import type { Core } from "../../../test/support/core.js";
import { eph, useCore, type Live } from "./eph.testkit.js";

// gated prints a line, then waits for the file $GATE, which the test creates once it has
// seen that line: the line cannot have come from a log stored after the step ended.
const PLUGIN = `
name: gated@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: before
    outputs: [{name: v, valueFromPath: /tmp/v}]
    script: |
      #!/bin/sh
      echo "before ran"
      printf 1 > /tmp/v
  - name: gated
    inputs:
    - {name: gate, valueFromSandbox: true}
    - {name: v, valueFromStep: {name: before, output: v}}
    outputs: [{name: v, valueFromPath: /tmp/v}]
    script: |
      #!/bin/sh
      echo "waiting for the gate"
      while [ ! -e "$GATE" ]; do sleep 0.05; done
      echo "through the gate"
      printf 2 > /tmp/v
  - name: after
    inputs: [{name: v, valueFromStep: {name: gated, output: v}}]
    script: |
      #!/bin/sh
      printf 'after ran\\nline two\\nno newline'
  - name: binary
    script: |
      #!/bin/sh
      printf 'ok\\377\\n'
  - name: chatty
    script: |
      #!/bin/sh
      head -c 9000000 /dev/zero | tr '\\0' x
      echo
      echo "the last line"
`;

const sandbox = (gate: string) => `
name: feature-x
spec:
  cluster: local
  resources:
  - {name: db, plugin: gated, params: {gate: "${gate}"}}
`;

const LOGS = ["logs", "--sandbox", "feature-x", "--resource", "db"];

describe("eph logs while steps run", () => {
  const core = useCore();
  const rk = () => `${core().tag}00000001`;
  const gate = () => join(core().scratch, "gate");

  /** Publishes the plugin and applies the sandbox without waiting: its steps start now. */
  async function applyGated(c: Core): Promise<void> {
    const files = [
      ["plugin.yaml", PLUGIN, ["plugin", "apply"]],
      ["sb.yaml", sandbox(gate()), ["sandbox", "apply", "--wait=false"]],
    ] as const;
    for (const [file, text, args] of files) {
      const r = await eph(c.address, [...args, "-f", c.file(file, text)]);
      if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}:\n${r.stderr}`);
    }
  }

  const ended = async (step: string) =>
    (await core().events()).some((e) => e.subject === `${rk()}.db.create.${step}.1` && e.type !== "ephemera.steprun.started.v1");

  it("--follow prints a line a step wrote before the step ends, and exits 0 once it has ended", async () => {
    await applyGated(core());
    const live: Live = { stdout: "", stderr: "" };
    // Asked before the step is even dispatched: it waits for it.
    const following = eph(core().address, [...LOGS, "--step", "gated", "--follow"], { live });
    await waitFor(() => live.stdout === "waiting for the gate\n", { timeoutMs: 30_000, what: "the step's first line through eph logs --follow" });
    // The step cannot have ended: it waits for the gate, which does not exist yet.
    expect(await ended("gated")).toBe(false);
    core().file("gate", "");
    const r = await following;
    expect(r).toMatchObject({ code: 0, stdout: "waiting for the gate\nthrough the gate\n", stderr: "" });
    expect(await ended("gated")).toBe(true);
  });

  it("--follow of a whole resource prints each step as it runs, in workflow order, and exits when the workflow ends", async () => {
    await applyGated(core());
    const live: Live = { stdout: "", stderr: "" };
    const following = eph(core().address, [...LOGS, "--phase", "create", "--follow"], { live });
    await waitFor(() => live.stdout.endsWith("waiting for the gate\n"), { timeoutMs: 30_000, what: "gated's first line" });
    // Runs go out in plan order as they exist: binary and chatty, dispatched with before, may come ahead of gated.
    expect(live.stdout.startsWith("before ran\n")).toBe(true);
    expect(await ended("gated")).toBe(false);
    core().file("gate", "");
    const r = await following;
    expect(r.code).toBe(0);
    // binary and chatty run beside the chain; each run is printed whole, one after the other.
    expect(r.stderr.split("\n").filter(Boolean).sort()).toEqual([
      "==> after (create) <==", "==> before (create) <==", "==> binary (create) <==", "==> chatty (create) <==", "==> gated (create) <==",
    ]);
    const stdout = r.stdoutBytes.toString("latin1");
    expect(stdout.indexOf("before ran\n")).toBeLessThan(stdout.indexOf("waiting for the gate\nthrough the gate\n"));
    expect(stdout.indexOf("through the gate\n")).toBeLessThan(stdout.indexOf("after ran\nline two\nno newline"));
    expect((await core().waitForEvent("ephemera.workflow.succeeded.v1", `${rk()}.db.create`)).type).toBeDefined();
  });

  it("without --follow shows what a running step has written so far, and returns", async () => {
    await applyGated(core());
    const sofar = await waitFor(async () => {
      const r = await eph(core().address, [...LOGS, "--step", "gated"]);
      return r.code === 0 && r.stdout === "waiting for the gate\n" ? r : undefined;
    }, { timeoutMs: 30_000, what: "the running step's first line" });
    expect(sofar.stderr).toBe("");
    expect(await ended("gated")).toBe(false);
    core().file("gate", "");
  });

  it("--follow exits 1 naming what does not exist: a step, a sandbox, a resource", async () => {
    await applyGated(core());
    core().file("gate", "");
    const step = await eph(core().address, [...LOGS, "--step", "nope", "--follow"]);
    expect(step.code).toBe(1);
    expect(step.stderr).toContain("error: resource db of sandbox feature-x has no step nope (its steps: before, gated, after, binary, chatty)");
    const inPhase = await eph(core().address, [...LOGS, "--step", "gated", "--phase", "delete", "--follow"]);
    expect(inPhase.code).toBe(1);
    expect(inPhase.stderr).toContain("has no step gated in its delete workflow");
    const sb = await eph(core().address, ["logs", "--sandbox", "nope", "--resource", "db", "--follow"]);
    expect(sb).toMatchObject({ code: 1, stdout: "" });
    expect(sb.stderr).toContain("sandbox nope not found");
    const res = await eph(core().address, ["logs", "--sandbox", "feature-x", "--resource", "cache", "--follow"]);
    expect(res.stderr).toContain("sandbox feature-x has no resource cache");
  });

  it("-o json prints one object per line of log, a line split across writes once, non-UTF-8 as base64", async () => {
    await applyGated(core());
    core().file("gate", "");
    await core().waitForEvent("ephemera.workflow.succeeded.v1", `${rk()}.db.create`, 30_000);
    const r = await eph(core().address, [...LOGS, "--step", "after", "-o", "json"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    const docs = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(docs.map(({ time: _t, ...rest }) => rest)).toEqual(["after ran", "line two", "no newline"].map((line) => ({
      sandbox: "feature-x", resource: "db", step: "after", phase: "create", attempt: 1, runId: `${rk()}.db.create.after.1`, line,
    })));
    for (const d of docs) expect(Date.parse(d.time)).toBeGreaterThan(Date.now() - 60_000);
    const binary = await eph(core().address, [...LOGS, "--step", "binary", "-o", "json"]);
    expect(JSON.parse(binary.stdout)).toMatchObject({ step: "binary", base64: Buffer.from([0x6f, 0x6b, 0xff]).toString("base64") });
  });

  it("--since shows only what was written in that last span", async () => {
    await applyGated(core());
    const live: Live = { stdout: "", stderr: "" };
    const following = eph(core().address, [...LOGS, "--step", "gated", "--follow", "-o", "json"], { live });
    await waitFor(() => live.stdout.includes("waiting for the gate"), { timeoutMs: 30_000, what: "the first line" });
    const first = Date.parse(JSON.parse(live.stdout.split("\n")[0]!).time);
    // The second line must be written well after the first: wait for the clock, not for a while.
    await waitFor(() => Date.now() > first + 1000, { what: "a second to pass since the first line" });
    core().file("gate", "");
    expect((await following).code).toBe(0);
    const since = `${Date.now() - (first + 500)}ms`;
    const recent = await eph(core().address, [...LOGS, "--step", "gated", "--since", since]);
    expect(recent).toMatchObject({ code: 0, stdout: "through the gate\n" });
    // Every unit and form of the one duration parser: days and weeks too.
    for (const span of ["1h", "1h30m", "2d", "1w", "1.5d"]) {
      const all = await eph(core().address, [...LOGS, "--step", "gated", "--since", span]);
      expect({ span, ...all }).toMatchObject({ span, code: 0, stdout: "waiting for the gate\nthrough the gate\n" });
    }
    const bad = await eph(core().address, [...LOGS, "--since", "yesterday"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--since: "yesterday" is not a duration such as 90s, 10m, 1h30m, 2d or 1w');
  });

  it("keeps a step's log within its bound, marking where it was cut, with its end", async () => {
    await applyGated(core());
    core().file("gate", "");
    await core().waitForEvent("ephemera.workflow.succeeded.v1", `${rk()}.db.create`, 60_000);
    const r = await eph(core().address, [...LOGS, "--step", "chatty"]);
    expect(r.code).toBe(0);
    const text = r.stdout;
    expect(text.startsWith("x".repeat(1000))).toBe(true);
    expect(text).toContain("\n[ephemera] the log reached its limit of 8 MiB: what follows is left out, but for its last 64 KiB, stored when the step ends\n");
    expect(text).toMatch(/\n\[ephemera\] \d+ bytes of log left out; the last 65536 bytes follow\nx+\nthe last line\n$/);
    expect(r.stdoutBytes.length).toBeLessThan(8 * 1024 * 1024 + 64 * 1024 + 400);
  });

  it("a deleted sandbox's logs stay readable", async () => {
    await applyGated(core());
    core().file("gate", "");
    await core().waitForEvent("ephemera.workflow.succeeded.v1", `${rk()}.db.create`, 30_000);
    expect((await eph(core().address, ["sandbox", "delete", "feature-x"])).code).toBe(0);
    expect((await eph(core().address, ["sandbox", "get", "feature-x"])).code).toBe(1);
    const r = await eph(core().address, [...LOGS, "--step", "gated"]);
    expect(r).toMatchObject({ code: 0, stdout: "waiting for the gate\nthrough the gate\n" });
    const followed = await eph(core().address, [...LOGS, "--step", "before", "--follow"]);
    expect(followed).toMatchObject({ code: 0, stdout: "before ran\n" });
  });
});

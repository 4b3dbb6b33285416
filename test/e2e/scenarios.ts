// The end-to-end scenarios every step driver must pass: the built stack and `eph` as
// processes, against the real NATS and Redis of this machine. Each driver's spec file
// starts its stack and calls endToEndScenarios.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import type { TestStack } from "../support/stack.js";

const DIAMOND = `
name: diamond@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: a
    inputs:
    - {name: greeting, valueFromSandbox: true}            # no "as": env GREETING
    - {name: suffix, valueFromSandbox: true, as: {path: /in/suffix}}
    - {name: missing-param, valueFromSandbox: true}        # not set by the sandbox: unset
    outputs:
    - {name: word, valueFromPath: /tmp/word}
    script: |
      #!/usr/bin/env bash
      set -eu
      echo "a sees \${MISSING_PARAM:-unset}"
      printf '%s-%s' "$GREETING" "$(cat /in/suffix)" > /tmp/word
  - name: b
    inputs:
    - {name: word, valueFromStep: {name: a, output: word}, as: {env: WORD}}
    - {name: gate, valueFromSandbox: true}
    outputs: [{name: upper, valueFromPath: /out/upper}]
    script: |
      #!/usr/bin/env bash
      echo "b at the gate"
      while [ ! -e "$GATE" ]; do sleep 0.05; done
      printf '%s' "\${WORD^^}" > /out/upper
  - name: c
    inputs:
    - {name: word, valueFromStep: {name: a, output: word}, as: {path: /in/word}}
    - {name: gate, valueFromSandbox: true}
    outputs: [{name: length, valueFromPath: /tmp/len}]
    script: |
      #!/usr/bin/env bash
      echo "c at the gate"
      while [ ! -e "$GATE" ]; do sleep 0.05; done
      printf '%s' "$(wc -c < /in/word | tr -d ' ')" > /tmp/len
  - name: d
    inputs:
    - {name: upper, valueFromStep: {name: b, output: upper}, as: {env: U, path: /in/u}}
    - {name: length, valueFromStep: {name: c, output: length}}
    outputs: [{name: joined, valueFromPath: /tmp/joined}]
    script: |
      #!/usr/bin/env bash
      printf '%s:%s:%s' "$U" "$(cat /in/u)" "$LENGTH" > /tmp/joined
  delete:
  - name: cleanup
    inputs: [{name: word, valueFromStep: {name: a, output: word}}]
    script: |
      #!/usr/bin/env bash
      echo "cleaning up $WORD in $SIGNADOT_SANDBOX_NAME/$SIGNADOT_RESOURCE_NAME"
`;

const sandboxFile = (name: string, plugin: string, params = "") => `
name: ${name}
spec:
  cluster: local
  resources:
  - name: res
    plugin: ${plugin}
    params: {${params}}
`;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any


/** The scenarios, on the stack `current()` returns (started by the caller's beforeAll). */
export function endToEndScenarios(stackOf: () => TestStack): void {
  /**
   * A barrier the steps of a test wait at: a file the test creates once every step has said,
   * in its log, that it is there. Outside /tmp (steps have their own), readable by the
   * steps' user.
   */
  const gate = () => {
    const dir = mkdtempSync("/var/tmp/ephemera-gate-");
    chmodSync(dir, 0o755);
    const file = join(dir, "open");
    return { file, open: () => writeFileSync(file, ""), remove: () => rmSync(dir, { recursive: true, force: true }) };
  };
  const logShows = (sandbox: string, step: string, text: string) =>
    waitFor(async () => (await stackOf().eph(["logs", "--sandbox", sandbox, "--resource", "res", "--step", step])).stdout.includes(text),
      { timeoutMs: 60_000, intervalMs: 200, what: `"${text}" in the log of ${sandbox}/${step}` });
  /** Starts `run` with the gate's path, opens the gate once each [sandbox, step, line] is in its log, and returns what `run` gives. */
  const throughGate = async <T>(run: (gateFile: string) => Promise<T>, waiting: Array<[string, string, string]>): Promise<T> => {
    const g = gate();
    try {
      const running = run(g.file);
      await Promise.all(waiting.map(([sandbox, step, text]) => logShows(sandbox, step, text)));
      g.open();
      return await running;
    } finally {
      g.remove();
    }
  };

  const ok = async (args: string[]) => {
    const r = await stackOf().eph(args);
    if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return r;
  };
  const getJson = async (name: string, ...flags: string[]) => JSON.parse((await ok(["sandbox", "get", name, "-o", "json", ...flags])).stdout) as Json;

  it("runs a diamond DAG with b and c in parallel, passes inputs by env and file, shows outputs, deletes with a delete step", async () => {
    await ok(["plugin", "apply", "-f", stackOf().file("diamond.yaml", DIAMOND)]);
    // b and c run at the same time: each waits at the gate until both are running.
    const applied = await throughGate(
      (gateFile) => ok(["sandbox", "apply", "-f", stackOf().file("sb-diamond.yaml", sandboxFile("diamond-sb", "diamond", `greeting: hello, suffix: world, gate: ${gateFile}`))]),
      [["diamond-sb", "b", "b at the gate"], ["diamond-sb", "c", "c at the gate"]],
    );
    expect(applied.stderr).toMatch(/\bb\b.*running|running.*\bb\b/i);

    const hidden = await getJson("diamond-sb");
    expect(hidden.status).toMatchObject({ ready: true, reason: "Ready" });
    expect(hidden.resources[0].outputs["d.joined"]).toEqual({ size: 26 });

    const shown = await getJson("diamond-sb", "--show-outputs");
    const outputs = shown.resources[0].outputs;
    expect(outputs["a.word"].value).toBe("hello-world");
    expect(outputs["b.upper"].value).toBe("HELLO-WORLD");
    expect(outputs["c.length"].value).toBe("11");
    expect(outputs["d.joined"].value).toBe("HELLO-WORLD:HELLO-WORLD:11");
    expect(shown.routingKey).toMatch(/^[a-z0-9]+$/);

    const events = await stackOf().events();
    const at = (type: string, step: string) => {
      const e = events.find((x) => x.type === type && (x.data as Json)["step"] === step && x.subject.startsWith(shown.routingKey));
      if (!e) throw new Error(`no ${type} for ${step}`);
      return Date.parse(e.time);
    };
    // b and c overlap: each started before the other finished.
    expect(at("ephemera.steprun.started.v1", "b")).toBeLessThan(at("ephemera.steprun.succeeded.v1", "c"));
    expect(at("ephemera.steprun.started.v1", "c")).toBeLessThan(at("ephemera.steprun.succeeded.v1", "b"));
    const dispatched = events.filter((e) => e.type === "ephemera.workflow.step_dispatched.v1" && e.subject === `${shown.routingKey}.res.create`);
    expect(dispatched.map((e) => (e.data as Json)["step"])).toEqual(["a", "b", "c", "d"]);
    expect(dispatched[1]!.position).toBe(dispatched[2]!.position); // dispatched in one commit

    // Output values are secrets: the event feed shows their names and sizes only.
    const feed = (await ok(["events", "--sandbox", "diamond-sb", "-o", "json"])).stdout.trim().split("\n").map((l) => JSON.parse(l) as Json);
    expect(feed[0]).toMatchObject({ type: "ephemera.sandbox.created.v1", subject: "diamond-sb" });
    const runA = feed.find((e) => e["type"] === "ephemera.steprun.succeeded.v1" && e["data"].step === "a")!;
    expect(runA["data"].outputs).toEqual([{ name: "word", size: 11 }]);
    expect(JSON.stringify(feed)).not.toContain(Buffer.from("hello-world").toString("base64"));
    expect(JSON.stringify(feed)).not.toContain("HELLO-WORLD");

    const logA = await ok(["logs", "--sandbox", "diamond-sb", "--resource", "res", "--step", "a"]);
    expect(logA.stdout).toContain("a sees unset");

    await ok(["sandbox", "delete", "diamond-sb"]);
    const gone = await stackOf().eph(["sandbox", "get", "diamond-sb"]);
    expect(gone.code).toBe(1);
    const cleanup = await ok(["logs", "--sandbox", "diamond-sb", "--resource", "res", "--phase", "delete"]);
    expect(cleanup.stdout).toContain("cleaning up hello-world in diamond-sb/res");
  });

  it("a step that exits non-zero fails the sandbox with its reason, and delete still runs", async () => {
    await ok(["plugin", "apply", "-f", stackOf().file("fails.yaml", `
name: fails
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: setup
    outputs: [{name: id, valueFromPath: /tmp/id}]
    script: |
      #!/bin/sh
      printf 'res-42' > /tmp/id
  - name: migrate
    inputs: [{name: id, valueFromStep: {name: setup, output: id}}]
    script: |
      #!/bin/sh
      echo "migrating $ID"
      echo "error: relation already exists" >&2
      exit 3
  delete:
  - name: teardown
    inputs: [{name: id, valueFromStep: {name: setup, output: id}}]
    script: |
      #!/bin/sh
      echo "teardown of $ID ran"
`)]);
    const applied = await stackOf().eph(["sandbox", "apply", "-f", stackOf().file("sb-fails.yaml", sandboxFile("fails-sb", "fails"))]);
    expect(applied.code).toBe(1);
    expect(applied.stderr).toContain("migrate");
    expect(applied.stderr).toMatch(/exit(ed| code)?:? 3/);
    expect(applied.stderr).toContain("error: relation already exists");

    const view = await getJson("fails-sb");
    expect(view.status.reason).toBe("ResourceFailed");
    expect(view.status.ready).toBe(false);
    expect(view.resources[0].status).toBe("Failed");

    await ok(["sandbox", "delete", "fails-sb"]);
    const teardown = await ok(["logs", "--sandbox", "fails-sb", "--resource", "res", "--phase", "delete"]);
    expect(teardown.stdout).toContain("teardown of res-42 ran");
  });

  it("two sandboxes of one plugin at once each see only their own files at the same paths", async () => {
    await ok(["plugin", "apply", "-f", stackOf().file("iso.yaml", `
name: iso
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: write
    inputs: [{name: gate, valueFromSandbox: true}]
    outputs:
    - {name: fromdir, valueFromPath: /work/iso-shared/value}
    - {name: fromtmp, valueFromPath: /tmp/value}
    script: |
      #!/usr/bin/env bash
      set -eu
      key="$SIGNADOT_SANDBOX_ROUTING_KEY"
      printf '%s' "$key" > "/work/iso-shared/$key"
      printf '%s' "$key" > "/tmp/$key"
      echo "written"
      while [ ! -e "$GATE" ]; do sleep 0.05; done
      # Both have written by now: each must see its own file only.
      test "$(ls /work/iso-shared)" = "$key"
      test "$(ls /tmp | grep -v '^\\.')" = "$key"
      cp "/work/iso-shared/$key" /work/iso-shared/value
      cp "/tmp/$key" /tmp/value
`)]);
    const [one, two] = await throughGate(
      (gateFile) => Promise.all(["iso-one", "iso-two"].map((n) =>
        stackOf().eph(["sandbox", "apply", "-f", stackOf().file(`${n}.yaml`, sandboxFile(n, "iso", `gate: ${gateFile}`))]))),
      [["iso-one", "write", "written"], ["iso-two", "write", "written"]],
    );
    expect([one!.code, two!.code]).toEqual([0, 0]);
    for (const name of ["iso-one", "iso-two"]) {
      const view = await getJson(name, "--show-outputs");
      expect(view.resources[0].outputs["write.fromdir"].value).toBe(view.routingKey);
      expect(view.resources[0].outputs["write.fromtmp"].value).toBe(view.routingKey);
    }
    await Promise.all(["iso-one", "iso-two"].map((n) => ok(["sandbox", "delete", n])));
  });
}

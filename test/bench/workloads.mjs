// What `pnpm bench` asks ephemera to run: the plugins (a chain, a diamond, a four-step
// plugin like hello-db), the same chain as a Makefile for the baseline, and a watch on the
// API's event stream that says when each sandbox became ready (or failed).
import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as pb from "../../services/proto/dist/index.js";

const sh = (body) => `#!/bin/sh\n${body}\n`;
const from = (step, as) => ({ name: "v", valueFromStep: { name: step, output: "v" }, ...(as ? { as } : {}) });
const out = { name: "v", valueFromPath: "/tmp/v" };

export function plugin(name, create) {
  return pb.ResourcePlugin.fromPartial({ name: `${name}@1.0.0`, spec: { description: "pnpm bench", runner: { image: "bench" }, create } });
}

/** n steps in a line, each `true` but for passing one value on through a file. */
export function chainPlugin(n) {
  return plugin(`chain${n}`, Array.from({ length: n }, (_, i) => i === 0
    ? { name: "s1", outputs: [out], script: sh("printf x > /tmp/v") }
    : { name: `s${i + 1}`, inputs: [from(`s${i}`, { path: "/work/v" })], outputs: [out], script: sh("cp /work/v /tmp/v") }));
}

/** root → two parallel `sleep <s>` steps → join. */
export function diamondPlugin(seconds) {
  const sleeper = (name) => ({ name, inputs: [from("root", { path: "/work/v" })], outputs: [out], script: sh(`sleep ${seconds}; cp /work/v /tmp/v`) });
  return plugin("diamond", [
    { name: "root", outputs: [out], script: sh("printf x > /tmp/v") },
    sleeper("left"),
    sleeper("right"),
    {
      name: "join",
      inputs: [{ name: "a", valueFromStep: { name: "left", output: "v" } }, { name: "b", valueFromStep: { name: "right", output: "v" } }],
      script: sh("true"),
    },
  ]);
}

/** hello-db's shape with sh scripts: provision → (schema, data) → verify; a sandbox param, env and file inputs. */
export function fourStepPlugin() {
  return plugin("fourstep", [
    { name: "provision", inputs: [{ name: "dbname", valueFromSandbox: true }], outputs: [out], script: sh('printf "db-%s" "$DBNAME" > /tmp/v') },
    { name: "schema", inputs: [from("provision", { env: "DSN" })], outputs: [out], script: sh('printf "%s:t" "$DSN" > /tmp/v') },
    { name: "data", inputs: [from("provision", { path: "/work/host" })], outputs: [out], script: sh("cp /work/host /tmp/v") },
    {
      name: "verify",
      inputs: [{ name: "t", valueFromStep: { name: "schema", output: "v" } }, { name: "l", valueFromStep: { name: "data", output: "v" } }],
      outputs: [out],
      script: sh('printf "%s %s" "$T" "$L" > /tmp/v'),
    },
  ]);
}

export const sandbox = (name, pluginName) =>
  pb.Sandbox.fromPartial({ name, spec: { cluster: "local", resources: [{ name: "r", plugin: pluginName, params: { dbname: name } }] } });

/** Applies `sb` and waits for its ready event; resolves to [create→ready ms, create-returned→ready ms]. */
export async function createAndWait(api, watch, sb, timeoutMs) {
  const t0 = performance.now();
  await api.applySandbox(sb);
  const created = performance.now();
  const ready = await watch.ready(sb.name, timeoutMs);
  return [ready - t0, ready - created];
}

/** The chain as a Makefile in `dir`: `make` runs it from scratch; resolves to its wall time (ms). */
export function makeChain(dir, n) {
  mkdirSync(dir, { recursive: true });
  const rules = ["s1:\n\tprintf x > s1"];
  for (let i = 2; i <= n; i++) rules.push(`s${i}: s${i - 1}\n\tcp s${i - 1} s${i}`);
  writeFileSync(join(dir, "Makefile"), `${rules.join("\n")}\n`);
  return () => {
    for (let i = 1; i <= n; i++) rmSync(join(dir, `s${i}`), { force: true });
    const t = performance.now();
    const r = spawnSync("make", ["-s", "-C", dir, `s${n}`], { stdio: ["ignore", "ignore", "pipe"] });
    const ms = performance.now() - t;
    if (r.status !== 0) throw new Error(`make exited ${r.status}: ${r.stderr}`);
    return ms;
  };
}

/**
 * One follow of the API's event stream (EventService.Watch, sandbox events only): the time
 * each sandbox's `ready` (or `resource_provision_failed`) arrived here.
 */
export function watchReadiness(api) {
  const seen = new Map(); // name → { at, failed? }
  const waiters = new Map();
  const controller = new AbortController();
  const settle = (name) => {
    const w = waiters.get(name);
    const s = seen.get(name);
    if (!w || !s) return;
    waiters.delete(name);
    clearTimeout(w.timer);
    if (s.failed) w.reject(new Error(`sandbox ${name} failed: ${s.failed}`));
    else w.resolve(s.at);
  };
  const ended = api.watchEvents({ follow: true, sandbox: "", typeGlob: "ephemera.sandbox.*" }, (record) => {
    const at = performance.now();
    const e = JSON.parse(record.json);
    if (e.type === "ephemera.sandbox.ready.v1") seen.set(e.subject, { at });
    else if (e.type === "ephemera.sandbox.resource_provision_failed.v1") {
      seen.set(e.subject, { at, failed: JSON.stringify(e.data?.failure ?? e.data).slice(0, 300) });
    } else return;
    settle(e.subject);
  }, { signal: controller.signal }).catch(() => "aborted");
  return {
    /** When `name` became ready (performance.now() of this process); rejects on failure or after `timeoutMs`. */
    ready(name, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(name);
          reject(new Error(`sandbox ${name} was not ready within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.set(name, { resolve, reject, timer });
        settle(name);
      });
    },
    async stop() {
      controller.abort();
      await ended;
    },
  };
}

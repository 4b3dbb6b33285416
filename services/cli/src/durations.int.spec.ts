// Durations past their limits are refused before anything is written, and a record stored
// by an older version beyond them (or beyond what can be rendered) never breaks a list, a
// get or a watch: it is shown with its own error, every other sandbox as usual.
import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev } from "@ephemera/events";
import { ValidationError } from "@ephemera/kit";
import { Registry } from "@ephemera/kit/metrics";
import { sandboxMetrics } from "../../sandbox/src/metrics.js";
import { Api } from "./api.js";
import { eph, useCore } from "./eph.testkit.js";

const core = useCore();
let api: Api;
beforeEach(() => { api = new Api(core().address); });
afterEach(() => api.close());

const HUGE_TTL = "99999999w";
const sandboxFile = (name: string, ttl?: string) => `
name: ${name}
spec:
  cluster: local
${ttl ? `  ttl: {duration: ${ttl}}\n` : ""}`;

/** What the sandbox service writes for a new sandbox, written as an older version would have (no validation of today). */
async function storeSandbox(name: string, routingKey: string, ttl: string): Promise<void> {
  const spec = pb.SandboxSpec.fromPartial({ cluster: "local", ttl: { duration: ttl, offsetFrom: "createdAt" } });
  const current = await core().store.read(Aggregates.sandbox, name);
  await core().store.append(Aggregates.sandbox, name, current,
    [encode(ev("ephemera.sandbox.created.v1", { name, routingKey, spec, endpoints: [], resources: [] }))], { source: "sandbox" });
  await core().sandboxes.feed.waitFor(await core().store.position());
}

describe("a TTL past its limit", () => {
  it("is refused by eph sandbox apply with exit code 2, naming the field; nothing is written", async () => {
    const r = await eph(core().address, ["sandbox", "apply", "-f", core().file("huge.yaml", sandboxFile("huge", HUGE_TTL))]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`spec.ttl.duration: duration "${HUGE_TTL}" is longer than the 365-day limit`);
    expect(r.stderr).not.toMatch(/at .*\.(js|ts):\d+/);
    const dry = await eph(core().address, ["sandbox", "apply", "--dry-run", "-f", core().file("huge.yaml", sandboxFile("huge", HUGE_TTL))]);
    expect(dry.code).toBe(2);
    expect(dry.stderr).toContain("spec.ttl.duration");
    expect(await core().events()).toEqual([]);
    expect((await eph(core().address, ["sandbox", "list", "-o", "json"])).stdout).toBe("[]\n");
  });

  it("is refused by the API itself (a client that does not validate), naming the field; nothing is written", async () => {
    const sandbox = pb.Sandbox.fromPartial({ name: "huge", spec: { cluster: "local", ttl: { duration: HUGE_TTL } } });
    const err = await api.applySandbox(sandbox).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).violations).toEqual([{
      field: "spec.ttl.duration", rule: "ttl-duration", description: `duration "${HUGE_TTL}" is longer than the 365-day limit`,
    }]);
    expect(await core().events()).toEqual([]);
  });

  it("of exactly 365 days is accepted", async () => {
    const r = await eph(core().address, ["sandbox", "apply", "-f", core().file("year.yaml", sandboxFile("year", "365d"))]);
    expect(r).toMatchObject({ code: 0, stderr: "" });
    const view = await api.getSandbox("year", false);
    expect(Date.parse(view.status!.scheduledDeleteTime) - Date.parse(view.createdAt)).toBe(365 * 86_400_000);
  });
});

describe("a stored sandbox that cannot be rendered (a 99999999w TTL an older version accepted)", () => {
  beforeEach(async () => {
    expect((await eph(core().address, ["sandbox", "apply", "-f", core().file("good.yaml", sandboxFile("good", "2d"))])).code).toBe(0);
    await storeSandbox("bad", `${core().tag}bad00001`, HUGE_TTL);
  });

  it("is listed with its own error by the service; the others as usual", async () => {
    const views = await api.listSandboxes();
    expect(views.map((v) => [v.name, v.renderError !== ""])).toEqual([["bad", true], ["good", false]]);
    const [bad, good] = views;
    expect(bad!.renderError).toContain("spec.ttl.duration");
    expect(bad!).toMatchObject({ routingKey: `${core().tag}bad00001`, status: { ready: false, reason: "RenderError" } });
    expect(good!.status!.scheduledDeleteTime).not.toBe("");
  });

  it("is shown by eph sandbox list, text and JSON, with what is wrong; the others as usual", async () => {
    const text = await eph(core().address, ["sandbox", "list"]);
    expect(text).toMatchObject({ code: 0, stderr: "" });
    const lines = text.stdout.trimEnd().split("\n");
    expect(lines[1]).toMatch(/^bad\s+false\s+RenderError\s/);
    expect(lines[2]).toMatch(/^good\s+(true|false)\s+\w+\s+0\/0\s+\d{4}-/);
    expect(text.stdout).toMatch(/bad: cannot be shown: spec\.ttl\.duration/);

    const json = await eph(core().address, ["sandbox", "list", "-o", "json"]);
    expect(json.code).toBe(0);
    const docs = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    expect(docs.map((d) => d["name"])).toEqual(["bad", "good"]);
    expect(docs[0]!["renderError"]).toEqual(expect.stringContaining("spec.ttl.duration"));
    expect(docs[1]).not.toHaveProperty("renderError");
  });

  it("is answered by eph sandbox get with what can be shown and the error, never a stack", async () => {
    const r = await eph(core().address, ["sandbox", "get", "bad", "-o", "json"]);
    expect(r).toMatchObject({ code: 0, stderr: "" });
    const doc = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(doc).toMatchObject({
      name: "bad", routingKey: `${core().tag}bad00001`, spec: { cluster: "local", ttl: { duration: HUGE_TTL } },
      status: { ready: false, reason: "RenderError" }, renderError: expect.stringContaining("spec.ttl.duration"),
    });
    expect(r.stdout).not.toMatch(/RangeError|at .*\.(js|ts):\d+/);
  });

  it("is shown in full again once applied with a TTL within the limit", async () => {
    const r = await eph(core().address, ["sandbox", "apply", "-f", core().file("bad.yaml", sandboxFile("bad", "2d"))]);
    expect(r).toMatchObject({ code: 0, stderr: "" });
    const view = await api.getSandbox("bad", false);
    expect(view.renderError).toBe("");
    expect(Date.parse(view.status!.scheduledDeleteTime)).toBe(Date.parse(view.createdAt) + 2 * 86_400_000);
  });

  it("is counted by the sandbox metric under RenderError; the others as usual", async () => {
    const registry = new Registry();
    sandboxMetrics(registry, core().sandboxes);
    const text = await registry.metrics();
    expect(text).toContain('ephemera_sandboxes{reason="RenderError"} 1');
    expect(text).toMatch(/ephemera_sandboxes\{reason="(Creating|Ready)"\} 1/);
  });

  it("is watched: the first view carries the error", async () => {
    const seen: pb.SandboxView[] = [];
    const end = await api.watchSandbox("bad", (v) => { seen.push(v); return true; }, { deadline: Date.now() + 10_000 });
    expect(end).toBe("stopped");
    expect(seen[0]).toMatchObject({ name: "bad", status: { reason: "RenderError" }, renderError: expect.stringContaining("spec.ttl.duration") });
  });
});

describe("durations on the command line", () => {
  it("--wait-timeout past 365 days exits 2 naming the flag, before anything is written", async () => {
    const path = core().file("good.yaml", sandboxFile("good", "2d"));
    for (const over of ["8761h", "366d", "53w"]) {
      const r = await eph(core().address, ["sandbox", "apply", "-f", path, "--wait-timeout", over]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`--wait-timeout: "${over}" is longer than the 365-day limit`);
    }
    expect(await core().events()).toEqual([]);
  });

  const limits = ["1000h", "1w", "2d", "1h30m", "1m30s", "90s", "1.5h"];
  it.each(limits)("--wait-timeout %s is accepted (past 24.8 days its timer chains)", async (limit) => {
    const path = core().file("good.yaml", sandboxFile("good", "2d"));
    const r = await eph(core().address, ["sandbox", "apply", "-f", path, "--wait-timeout", limit]);
    expect(r).toMatchObject({ code: 0, stderr: "" });
    expect(r.stdout).toContain("sandbox good ready");
  });

  it("a malformed --wait-timeout exits 2 naming the flag and the forms it takes", async () => {
    for (const bad of ["3", "1 h", "1y", "2 days", "0s"]) {
      const r = await eph(core().address, ["sandbox", "apply", "-f", core().file("good.yaml", sandboxFile("good")), "--wait-timeout", bad]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        `error: --wait-timeout: "${bad}" is not a duration such as 90s, 10m, 1h30m, 2d or 1w (numbers with a unit: ms, s, m, h, d or w)`,
      );
    }
    expect(await core().events()).toEqual([]);
  });

  it("eph logs --since past 365 days exits 2 naming the flag", async () => {
    const r = await eph(core().address, ["logs", "--sandbox", "good", "--resource", "db", "--since", "8761h"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--since: "8761h" is longer than the 365-day limit');
  });

  it("a file's TTL takes what the flags take, compound forms included", async () => {
    const r = await eph(core().address, ["sandbox", "apply", "-f", core().file("mixed.yaml", sandboxFile("mixed", "1d12h"))]);
    expect(r).toMatchObject({ code: 0, stderr: "" });
    const view = await api.getSandbox("mixed", false);
    expect(Date.parse(view.status!.scheduledDeleteTime) - Date.parse(view.createdAt)).toBe(36 * 3_600_000);
    const bad = await eph(core().address, ["sandbox", "apply", "-f", core().file("bad.yaml", sandboxFile("bad", "2 days"))]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('spec.ttl.duration: duration "2 days" is not a duration such as 90s, 10m, 1h30m, 2d or 1w');
  });
});

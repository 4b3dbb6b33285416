// The console in front of the real core (its API asking for tokens, its scheduler, IO context
// and runner running real steps): what a browser gets from each endpoint, that the API's
// roles decide (a viewer's writes refused by the API, nothing written), the live streams
// (and that they let go of the API when the browser goes), the page's files, and that the
// token never reaches the console's log.
import { rmSync } from "node:fs";
import { dirname } from "node:path";
import { call, grpc, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { TOKENS, tokensAccess } from "../../../test/support/api-tokens.js";
import { startCore, type Core } from "../../../test/support/core.js";
import { capturedLogger, http, sse, webFixture, type Answer } from "./console.testkit.js";
import { startConsole, type RunningConsole } from "./server.js";

const QUICK = {
  name: "quick@1.0.0",
  spec: {
    runner: { image: "debian:bookworm-slim" },
    create: [
      { name: "make", outputs: [{ name: "url", valueFromPath: "/outputs/url" }], script: "#!/bin/sh\necho hello from make\nprintf 'postgres://db' > /outputs/url\n" },
      { name: "use", inputs: [{ name: "url", valueFromStep: { name: "make", output: "url" }, as: { env: "URL" } }], script: "#!/bin/sh\necho using $URL\n" },
    ],
    delete: [{ name: "drop", script: "#!/bin/sh\necho dropped\n" }],
  },
};
/** Fails until the file named by its `gate` param exists: a retry then succeeds. */
const FLAKY = {
  name: "flaky@1.0.0",
  spec: {
    runner: { image: "debian:bookworm-slim" },
    create: [{ name: "try", inputs: [{ name: "gate", valueFromSandbox: true, as: { env: "GATE" } }], script: "#!/bin/sh\n[ -f \"$GATE\" ] || { echo not yet; exit 3; }\necho made it\n" }],
  },
};
/** Its first step waits for a file the test creates: the views before and after are told apart. */
const GATED = {
  name: "gated@1.0.0",
  spec: {
    runner: { image: "debian:bookworm-slim" },
    create: [
      { name: "wait", inputs: [{ name: "gate", valueFromSandbox: true, as: { env: "GATE" } }], outputs: [{ name: "done", valueFromPath: "/outputs/done" }],
        script: "#!/bin/sh\nwhile [ ! -f \"$GATE\" ]; do sleep 0.05; done\necho gate open\nprintf yes > /outputs/done\n" },
      { name: "after", inputs: [{ name: "done", valueFromStep: { name: "wait", output: "done" } }], script: "#!/bin/sh\necho after\n" },
    ],
  },
};

const web = webFixture();
const captured = capturedLogger("console");
let core: Core;
let console_: RunningConsole;
let plugins: pb.ResourcePluginServiceClient;
let sandboxes: pb.SandboxServiceClient;

const bearer = (role: keyof typeof TOKENS) => () => {
  const m = new grpc.Metadata();
  m.set("authorization", `Bearer ${TOKENS[role]}`);
  return m;
};
const editor = bearer("editor");
/** A forced delete (a sandbox of a cluster without a runner cannot run its delete workflow) is an admin's. */
const forceDelete = (name: string) => call(sandboxes.delete.bind(sandboxes), { name, force: true }, 10_000, bearer("admin")());
const applyPlugin = (doc: unknown) => call(plugins.apply.bind(plugins), { plugin: pb.ResourcePlugin.fromJSON(doc), dryRun: false }, 10_000, editor());
const applySandbox = (name: string, spec: Record<string, unknown>) =>
  call(sandboxes.apply.bind(sandboxes), { sandbox: pb.Sandbox.fromJSON({ name, spec }), dryRun: false }, 10_000, editor());
const getSandbox = (name: string) => call(sandboxes.get.bind(sandboxes), { name, showOutputs: false }, 10_000, editor());
const waitReady = (name: string) => waitFor(async () => (await getSandbox(name)).status?.reason === "Ready", { what: `${name} to be Ready`, timeoutMs: 30_000 });
const nowhere = (labels: Record<string, string>) => ({ cluster: "nowhere", labels, resources: [{ name: "db", plugin: "quick" }] });

const as = (role: keyof typeof TOKENS) => ({ Authorization: `Bearer ${TOKENS[role]}` });
const CSRF = { "X-Ephemera-Console": "1" };
const get = (path: string, headers: Record<string, string> = as("viewer")) => http(console_.address, "GET", path, { headers });

beforeAll(async () => {
  core = await startCore({ api: { access: tokensAccess() } });
  plugins = new pb.ResourcePluginServiceClient(core.address, grpc.credentials.createInsecure());
  sandboxes = new pb.SandboxServiceClient(core.address, grpc.credentials.createInsecure());
  console_ = await startConsole({ listen: "127.0.0.1:0", api: core.address, webRoot: web.root, logger: captured.logger, listPollMs: 200, pingMs: 100 });
  await applyPlugin(QUICK);
  await applyPlugin(GATED);
  await applyPlugin(FLAKY);
});
afterAll(async () => {
  plugins?.close();
  sandboxes?.close();
  await console_?.close();
  await core?.stop();
  rmSync(dirname(web.root), { recursive: true, force: true });
});

describe("signing in", () => {
  it("answers whoami 401 without a token or with a wrong one, naming the API's reason", async () => {
    expect(await get("/api/whoami", {})).toMatchObject({ status: 401, json: { error: "missing bearer token", code: "UNAUTHENTICATED" } });
    const wrong = await http(console_.address, "POST", "/api/login", { body: { token: "not-a-token" } });
    expect(wrong).toMatchObject({ status: 401, json: { error: "token not recognised", code: "UNAUTHENTICATED" } });
    expect(wrong.headers["set-cookie"]).toBeUndefined();
  });

  it("logs in with a token (a cookie the page cannot read), says who it is, and logs out", async () => {
    const login = await http(console_.address, "POST", "/api/login", { body: { token: TOKENS.viewer } });
    expect(login).toMatchObject({ status: 200, json: { name: "test-viewer", role: "viewer" } });
    const cookie = login.headers["set-cookie"]![0]!;
    expect(cookie).toBe(`ephemera_console=${TOKENS.viewer}; HttpOnly; SameSite=Strict; Path=/`);
    const session = { Cookie: cookie.split(";")[0]! };
    // Behind an ingress that ended TLS the cookie is for HTTPS only.
    const proxied = await http(console_.address, "POST", "/api/login", { body: { token: TOKENS.viewer }, headers: { "X-Forwarded-Proto": "https" } });
    expect(proxied.headers["set-cookie"]).toEqual([`${cookie}; Secure`]);
    expect(await get("/api/whoami", session)).toMatchObject({ status: 200, json: { name: "test-viewer", role: "viewer" } });
    expect((await get("/api/whoami", as("admin"))).json).toEqual({ name: "test-admin", role: "admin" });

    expect(await http(console_.address, "POST", "/api/logout", { headers: session })).toMatchObject({ status: 403, json: { code: "PERMISSION_DENIED" } });
    const logout = await http(console_.address, "POST", "/api/logout", { headers: { ...session, ...CSRF } });
    expect(logout.status).toBe(204);
    expect(logout.headers["set-cookie"]).toEqual(["ephemera_console=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"]);
  });
});

describe("what the API's roles decide", () => {
  const name = "roles-a";
  beforeAll(async () => {
    await applySandbox(name, { cluster: "local", resources: [{ name: "db", plugin: "quick" }] });
    await waitReady(name);
  });

  it("refuses a viewer's delete and retry (the API's 403) and outputs, writing nothing", async () => {
    const written = (await core.events()).length;
    const del = await http(console_.address, "DELETE", `/api/sandboxes/${name}`, { headers: { ...as("viewer"), ...CSRF } });
    expect(del).toMatchObject({ status: 403, json: { error: "role viewer may not call SandboxService/Delete (it needs editor)", code: "PERMISSION_DENIED" } });
    const retry = await http(console_.address, "POST", `/api/sandboxes/${name}/retry`, { headers: { ...as("viewer"), ...CSRF } });
    expect(retry).toMatchObject({ status: 403, json: { code: "PERMISSION_DENIED" } });
    const outputs = await get(`/api/sandboxes/${name}/outputs`);
    expect(outputs).toMatchObject({ status: 403, json: { code: "PERMISSION_DENIED" } });
    expect(outputs.text).not.toContain("postgres://db");
    expect((await core.events()).length).toBe(written);
  });

  it("shows a viewer the sandbox without output values, and an editor the values with no-store", async () => {
    const viewed = await get(`/api/sandboxes/${name}`);
    expect(viewed).toMatchObject({ status: 200, json: { name, status: { ready: true, reason: "Ready" } } });
    expect(viewed.text).not.toContain(Buffer.from("postgres://db").toString("base64"));
    expect(viewed.text).not.toContain("postgres://db");
    const outputs = await get(`/api/sandboxes/${name}/outputs`, as("editor"));
    expect(outputs.status).toBe(200);
    expect(outputs.headers["cache-control"]).toBe("no-store");
    expect(outputs.json).toEqual({ outputs: [{ resource: "db", key: "make.url", size: 13, value: "postgres://db" }] });
    expect(await get("/api/sandboxes/nope")).toMatchObject({ status: 404, json: { code: "NOT_FOUND" } });
  });

  it("refuses a change without the console's CSRF header before asking the API", async () => {
    const written = (await core.events()).length;
    expect(await http(console_.address, "DELETE", `/api/sandboxes/${name}`, { headers: as("editor") }))
      .toMatchObject({ status: 403, json: { code: "PERMISSION_DENIED", error: expect.stringContaining("X-Ephemera-Console: 1") } });
    expect((await core.events()).length).toBe(written);
  });

  it("retries a failed sandbox for an editor (the API's 409 when nothing failed)", async () => {
    expect(await http(console_.address, "POST", `/api/sandboxes/${name}/retry`, { headers: { ...as("editor"), ...CSRF } }))
      .toMatchObject({ status: 409, json: { code: "FAILED_PRECONDITION" } });
    const gate = `${core.scratch}/gate-roles-b`;
    await applySandbox("roles-b", { cluster: "local", resources: [{ name: "db", plugin: "flaky", params: { gate } }] });
    await waitFor(async () => (await getSandbox("roles-b")).status?.reason === "ResourceFailed", { what: "roles-b to fail", timeoutMs: 30_000 });
    core.file("gate-roles-b", "open");
    const retry = await http(console_.address, "POST", "/api/sandboxes/roles-b/retry", { headers: { ...as("editor"), ...CSRF } });
    expect(retry).toMatchObject({ status: 200, json: { sandbox: { name: "roles-b" }, resources: ["db"] } });
    await waitReady("roles-b");
  });

  it("deletes for an editor", async () => {
    const del = await http(console_.address, "DELETE", `/api/sandboxes/${name}`, { headers: { ...as("editor"), ...CSRF } });
    expect(del).toMatchObject({ status: 200, json: { name } });
    await core.waitForEvent("ephemera.sandbox.deleted.v1", name);
  });
});

describe("the sandbox list", () => {
  beforeAll(async () => {
    await applySandbox("list-pay-1", nowhere({ team: "payments", env: "dev" }));
    await applySandbox("list-pay-2", nowhere({ team: "payments" }));
    await applySandbox("list-web-1", nowhere({ team: "web" }));
  });
  const names = async (query: string) => ((await get(`/api/sandboxes?${query}`)).json as { sandboxes: Array<{ name: string }> }).sandboxes.map((r) => r.name);

  it("filters server-side by label globs, status and name, and counts statuses over every sandbox", async () => {
    expect(await names("label=team%3Dpay*")).toEqual(["list-pay-1", "list-pay-2"]);
    expect(await names("label=team%3Dpay*&label=env%3Ddev")).toEqual(["list-pay-1"]);
    expect(await names("q=WEB")).toEqual(["list-web-1"]);
    const all = (await get("/api/sandboxes?q=list-")).json as { total: number; sandboxes: Array<{ name: string; status: string; cluster: string; resources: number; labels: object }>; statuses: Record<string, number> };
    const reason = all.sandboxes[0]!.status;
    expect(all.sandboxes[0]).toMatchObject({ name: "list-pay-1", cluster: "nowhere", resources: 1, labels: { team: "payments", env: "dev" } });
    expect(await names(`q=list-&status=${reason}`)).toEqual(["list-pay-1", "list-pay-2", "list-web-1"]);
    expect(await names("q=list-&status=NoSuchStatus")).toEqual([]);
    expect(all.total).toBeGreaterThanOrEqual(3);
    expect(all.statuses[reason]).toBeGreaterThanOrEqual(3);
    expect(await get("/api/sandboxes?label=team")).toMatchObject({ status: 400, json: { code: "INVALID_ARGUMENT" } });
  });

  it("streams a snapshot, then a new sandbox without reload, then its removal; and stops listing when the browser goes", async () => {
    const stream = await sse(console_.address, "/api/sandboxes/stream?label=team%3Dlive*", as("viewer"));
    expect(stream.status).toBe(200);
    expect(stream.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(stream.raw()).toMatch(/^retry: 2000\n\n/);
    expect((await stream.next((e) => e.event === "snapshot", "the snapshot")).data).toMatchObject({ sandboxes: [] });
    expect(console_.open().poller).toBe(1);
    await applySandbox("list-live-1", nowhere({ team: "live-ops" }));
    await applySandbox("list-other", nowhere({ team: "other" }));
    const upsert = await stream.next((e) => e.event === "upsert", "the new sandbox's row");
    expect(upsert.data).toMatchObject({ row: { name: "list-live-1", labels: { team: "live-ops" } } });
    await forceDelete("list-live-1");
    await stream.next((e) => e.event === "remove", "the deleted sandbox's removal", 20_000);
    expect(stream.events.filter((e) => e.event === "remove").map((e) => e.data)).toEqual([{ name: "list-live-1" }]);
    expect(stream.events.filter((e) => e.event === "upsert").every((e) => (e.data as { row: { name: string } }).row.name === "list-live-1")).toBe(true);
    await waitFor(() => stream.raw().includes("\n: ping\n\n"), { what: "a ping comment" });
    stream.close();
    await waitFor(() => console_.open().poller === 0, { what: "the list poller to stop" });
  });
});

describe("one sandbox, live", () => {
  const name = "gated-a";
  const gate = () => `${core.scratch}/gate-${name}`;

  it("streams its views as its steps go from waiting to Succeeded, then its log, and lets go of the watch when the browser goes", async () => {
    await applySandbox(name, { cluster: "local", resources: [{ name: "db", plugin: "gated", params: { gate: gate() } }] });
    const stream = await sse(console_.address, `/api/sandboxes/${name}/stream`, as("viewer"));
    type View = { status?: { reason?: string }; resources?: Array<{ steps?: Array<{ name: string; status?: string; dependsOn?: string[] }> }> };
    const steps = (e: { data: unknown }) => (e.data as View).resources?.[0]?.steps ?? [];
    const before = await stream.next((e) => e.event === "sandbox" && steps(e).some((s) => s.name === "wait" && s.status === "Running"), "the gated step running");
    expect(steps(before).find((s) => s.name === "after")?.status).not.toBe("Succeeded");
    expect(console_.open().upstream).toBe(1);
    core.file(`gate-${name}`, "open");
    const after = await stream.next((e) => e.event === "sandbox" && steps(e).length === 2 && steps(e).every((s) => s.status === "Succeeded"),
      "every step Succeeded", 30_000);
    expect(steps(after).find((s) => s.name === "after")).toMatchObject({ dependsOn: ["wait"] });
    stream.close();
    await waitFor(() => console_.open().upstream === 0, { what: "the upstream watch to be cancelled" });

    const logs = await sse(console_.address, `/api/sandboxes/${name}/logs?resource=db&phase=create&step=wait`, as("viewer"));
    await logs.ended;
    expect(logs.events.map((e) => e.event)).toEqual(expect.arrayContaining(["run", "chunk", "end"]));
    expect(logs.events.find((e) => e.event === "run")!.data).toMatchObject({ attempt: 1, step: "wait", phase: "create" });
    expect(logs.events.filter((e) => e.event === "chunk").map((e) => (e.data as { text: string }).text).join("")).toContain("gate open");
    expect(logs.events.at(-1)).toEqual({ event: "end", data: {} });
  });

  it("ends the sandbox stream with `deleted` when the sandbox is gone, and a log of nothing known with an error event", async () => {
    await applySandbox("gone-a", nowhere({}));
    const stream = await sse(console_.address, "/api/sandboxes/gone-a/stream", as("viewer"));
    await stream.next((e) => e.event === "sandbox", "the first view");
    await forceDelete("gone-a");
    await stream.next((e) => e.event === "deleted", "the deleted event", 20_000);
    await stream.ended;
    expect(stream.events.at(-1)).toEqual({ event: "deleted", data: { name: "gone-a" } });

    const unknown = await sse(console_.address, "/api/sandboxes/nope/logs?resource=db", as("viewer"));
    await unknown.ended;
    expect(unknown.events).toEqual([{ event: "error", data: { error: expect.stringContaining("nope"), code: "NOT_FOUND" } }]);
  });
});

describe("plugins", () => {
  it("lists every plugin with its versions, and one version with its workflows' graphs", async () => {
    await applyPlugin({ ...QUICK, name: "quick@1.1.0" });
    const list = (await get("/api/plugins")).json as { plugins: Array<{ name: string; versions: Array<{ version: string }> }> };
    expect(list.plugins.map((p) => [p.name, p.versions.map((v) => v.version)])).toEqual([["flaky", ["1.0.0"]], ["gated", ["1.0.0"]], ["quick", ["1.0.0", "1.1.0"]]]);
    const one = await get("/api/plugins/quick/1.0.0");
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({
      plugin: { name: "quick", version: "1.0.0", spec: { create: [{ name: "make" }, { name: "use" }] } },
      graphs: {
        create: { nodes: [{ name: "make", inputs: [], outputs: ["url"] }, { name: "use", inputs: ["url"], outputs: [] }], edges: [{ from: "make", to: "use", label: "url" }] },
        delete: { nodes: [{ name: "drop", inputs: [], outputs: [] }], edges: [] },
      },
    });
    expect(await get("/api/plugins/quick/9.9.9")).toMatchObject({ status: 404, json: { code: "NOT_FOUND" } });
  });
});

describe("events", () => {
  it("lists the last events of a sandbox of a type, and streams the new ones live", async () => {
    await applySandbox("ev-a", nowhere({ team: "events" }));
    const listed = await get("/api/events?sandbox=ev-a&type=ephemera.sandbox.*&limit=1");
    const events = (listed.json as { events: Array<{ type: string; subject: string; seq?: number }> }).events;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ subject: "ev-a", type: expect.stringMatching(/^ephemera\.sandbox\./), seq: expect.any(Number) });
    expect(await get("/api/events?since=not-a-time")).toMatchObject({ status: 400, json: { error: expect.stringMatching(/^since: /) } });

    const stream = await sse(console_.address, "/api/events/stream?sandbox=ev-a&type=ephemera.sandbox.*", as("viewer"));
    const snapshot = await stream.next((e) => e.event === "snapshot", "the snapshot");
    const before = (snapshot.data as { events: Array<{ type: string; seq: number }> }).events;
    expect(before.map((e) => e.type)).toContain("ephemera.sandbox.created.v1");
    await forceDelete("ev-a");
    const live = await stream.next((e) => e.event === "event" && (e.data as { event: { type: string } }).event.type === "ephemera.sandbox.deleted.v1", "the deleted event live");
    const seqs = stream.events.filter((e) => e.event === "event").map((e) => (e.data as { event: { seq: number; subject: string } }).event);
    expect(seqs.every((e) => e.subject === "ev-a" && e.seq > Math.max(...before.map((b) => b.seq)))).toBe(true);
    expect(live).toBeDefined();
    stream.close();
    await waitFor(() => console_.open().upstream === 0, { what: "the event watch to be cancelled" });
  });
});

describe("the other lists", () => {
  it("answers route groups, jobs and job runner groups as the API's JSON, and health without the API", async () => {
    expect(await get("/api/routegroups")).toMatchObject({ status: 200, json: {} });
    expect(await get("/api/jobs")).toMatchObject({ status: 200, json: {} });
    expect(await get("/api/jobrunnergroups")).toMatchObject({ status: 200, json: {} });
    expect(await get("/api/routegroups/nope")).toMatchObject({ status: 404, json: { code: "NOT_FOUND" } });
    expect(await get("/healthz", {})).toMatchObject({ status: 200, text: "ok" });
    expect(await get("/api/nothing-here")).toMatchObject({ status: 404, json: { code: "NOT_FOUND" } });
  });
});

describe("the page's files", () => {
  const headersOf = (a: Answer) => a.headers;
  it("serves hashed assets for a year, pre-compressed as the browser accepts, with their type", async () => {
    const br = await get("/assets/app-abc123.js", { "Accept-Encoding": "gzip, br" });
    expect(headersOf(br)).toMatchObject({
      "content-type": "text/javascript; charset=utf-8", "content-encoding": "br", "cache-control": "public, max-age=31536000, immutable", vary: "Accept-Encoding",
      "content-security-policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:", "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
    });
    expect((await import("node:zlib")).brotliDecompressSync(br.body).toString()).toBe(web.script);
    const gz = await get("/assets/app-abc123.js", { "Accept-Encoding": "gzip" });
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect((await import("node:zlib")).gunzipSync(gz.body).toString()).toBe(web.script);
    const plain = await get("/assets/app-abc123.js", {});
    expect(plain.headers["content-encoding"]).toBeUndefined();
    expect(plain.text).toBe(web.script);
    const css = await get("/assets/app-abc123.css", { "Accept-Encoding": "br" });
    expect(css.headers).toMatchObject({ "content-type": "text/css; charset=utf-8" });
    expect(css.headers["content-encoding"]).toBeUndefined();
    expect((await get("/assets/app-missing.js", {})).status).toBe(404);
  });

  it("answers every other page with index.html, never cached (the app's routes)", async () => {
    for (const path of ["/", "/sandboxes", "/sandboxes/a/resources/db/create/make?attempt=2", "/plugins/quick/1.0.0"]) {
      const page = await get(path, {});
      expect([path, page.status, page.headers["content-type"], page.headers["cache-control"]]).toEqual([path, 200, "text/html; charset=utf-8", "no-cache"]);
      expect(page.text).toContain('<div id="root">');
    }
  });

  it("reads nothing outside the page's directory", async () => {
    for (const path of ["/assets/..%2f..%2fsecret.txt", "/assets/%2e%2e/%2e%2e/secret.txt", "/assets/../../secret.txt", "/../secret.txt", "/assets/..%5c..%5csecret.txt"]) {
      const answer = await get(path, {});
      expect([path, answer.text.includes(web.secret)]).toEqual([path, false]);
      expect([path, answer.status]).toEqual([path, path.startsWith("/assets/") ? 404 : 200]);
    }
  });
});

describe("the console's log", () => {
  it("never holds a token", () => {
    const log = captured.text();
    expect(log).toContain("console listening");
    for (const token of Object.values(TOKENS)) expect(log).not.toContain(token);
  });
});

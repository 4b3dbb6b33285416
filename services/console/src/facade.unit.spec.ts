// The console's pure pieces: error mapping, SSE framing, the sandbox list's filters and diff,
// plugin graphs, event windows, static paths and encodings, the session cookie.
import { grpc } from "@ephemera/kit/client";
import * as pb from "@ephemera/proto";
import { ApiCallError, ConsoleRequestError, errorResponse, httpStatusOf } from "./errors.js";
import { LastEvents, eventOf, inWindow, parseEventQuery, sinceMs } from "./events.js";
import { workflowGraph } from "./graph.js";
import { diffRows, matches, parseFilter, rowOf, sandboxList, type Row } from "./sandboxes.js";
import { clearedCookie, requestToken, sessionCookie } from "./session.js";
import { sseFrame } from "./sse.js";
import { acceptedEncodings, fileUnder } from "./static.js";

const view = (name: string, reason: string, labels: Record<string, string> = {}) => pb.SandboxView.fromPartial({
  name, routingKey: `rk-${name}`, createdAt: "2026-01-01T00:00:00Z",
  spec: { cluster: "local", labels, ttl: { duration: "2h" }, resources: [{ name: "db", plugin: "p" }] },
  status: { reason, ready: reason === "Ready", message: `${name} is ${reason}`, scheduledDeleteTime: "" },
  resources: [{ name: "db" }, { name: "cache" }],
});

describe("error mapping", () => {
  it("maps each gRPC status of the contract to its HTTP status, anything else to 500", () => {
    const s = grpc.status;
    expect([s.UNAUTHENTICATED, s.PERMISSION_DENIED, s.NOT_FOUND, s.INVALID_ARGUMENT, s.FAILED_PRECONDITION, s.DEADLINE_EXCEEDED, s.UNAVAILABLE, s.INTERNAL, s.UNKNOWN]
      .map(httpStatusOf)).toEqual([401, 403, 404, 400, 409, 504, 502, 500, 500]);
  });

  it("answers one line with the status's name; an unexpected error says nothing of its cause", () => {
    expect(errorResponse(new ApiCallError(grpc.status.PERMISSION_DENIED, "role viewer may not\ncall SandboxService/Delete")))
      .toEqual({ status: 403, body: { error: "role viewer may not call SandboxService/Delete", code: "PERMISSION_DENIED" } });
    expect(errorResponse(new ConsoleRequestError(400, "INVALID_ARGUMENT", "limit: bad"))).toEqual({ status: 400, body: { error: "limit: bad", code: "INVALID_ARGUMENT" } });
    expect(errorResponse(new Error("secret-token-xyz leaked"))).toEqual({ status: 500, body: { error: "the console failed to answer (see its log)", code: "INTERNAL" } });
  });
});

describe("SSE framing", () => {
  it("frames an event as its name and one data line of JSON, newlines in strings escaped", () => {
    expect(sseFrame("upsert", { row: { name: "a", message: "two\nlines" } })).toBe('event: upsert\ndata: {"row":{"name":"a","message":"two\\nlines"}}\n\n');
  });
});

describe("the sandbox list", () => {
  it("makes a row of a view: its status reason, labels, ttl and resource count; no spec beyond that", () => {
    expect(rowOf(view("a", "Ready", { team: "x" }))).toEqual({
      name: "a", cluster: "local", ready: true, status: "Ready", message: "a is Ready", labels: { team: "x" }, createdAt: "2026-01-01T00:00:00Z",
      ttl: "2h", scheduledDeleteTime: "", routingKey: "rk-a", resources: 2,
    });
  });

  it("filters by status, by every label glob and by a piece of the name; counts statuses over the whole set", () => {
    const views = [view("pay-1", "Ready", { team: "payments", env: "dev" }), view("pay-2", "ResourceFailed", { team: "payments" }), view("web-1", "Ready", { team: "web/front" })];
    const names = (query: string) => sandboxList(views, parseFilter(new URLSearchParams(query))).sandboxes.map((r) => r.name);
    expect(names("")).toEqual(["pay-1", "pay-2", "web-1"]);
    expect(names("status=Ready")).toEqual(["pay-1", "web-1"]);
    expect(names("label=team=pay*")).toEqual(["pay-1", "pay-2"]);
    expect(names("label=team=pay*&label=env=dev")).toEqual(["pay-1"]);
    expect(names("label=team=web*")).toEqual(["web-1"]); // `/` is an ordinary character
    expect(names("label=missing=*")).toEqual([]);
    expect(names("q=PAY&status=ResourceFailed")).toEqual(["pay-2"]);
    expect(sandboxList(views, parseFilter(new URLSearchParams("status=Ready")))).toMatchObject({ total: 3, statuses: { Ready: 2, ResourceFailed: 1 } });
  });

  it("refuses a label filter that is no key=glob, naming it", () => {
    expect(() => parseFilter(new URLSearchParams("label=team"))).toThrow('label filter "team" is not <key>=<glob>');
    expect(() => parseFilter(new URLSearchParams("label==x"))).toThrow(ConsoleRequestError);
  });

  it("sends upserts for new and changed rows and removals for rows gone, nothing for unchanged", () => {
    const a = rowOf(view("a", "Creating"));
    const b = rowOf(view("b", "Ready"));
    const before = new Map<string, Row>([["a", a], ["b", b]]);
    const aReady = rowOf(view("a", "Ready"));
    const c = rowOf(view("c", "Creating"));
    expect(diffRows(before, [aReady, c])).toEqual([{ kind: "upsert", row: aReady }, { kind: "upsert", row: c }, { kind: "remove", name: "b" }]);
    expect(diffRows(before, [a, b])).toEqual([]);
    expect(matches(a, parseFilter(new URLSearchParams("status=Ready")))).toBe(false);
  });
});

describe("plugin graphs", () => {
  it("draws an edge from each step to each step reading its outputs, labelled with the outputs read", () => {
    const steps = pb.ResourcePluginSpec.fromJSON({
      create: [
        { name: "db", outputs: [{ name: "url", valueFromPath: "/u" }, { name: "password", valueFromPath: "/p" }] },
        { name: "schema", inputs: [{ name: "URL", valueFromStep: { name: "db", output: "url" } }, { name: "PW", valueFromStep: { name: "db", output: "password" } }] },
        { name: "seed", inputs: [{ name: "URL", valueFromStep: { name: "db", output: "url" } }, { name: "NAME", valueFromSandbox: true }] },
      ],
    }).create;
    expect(workflowGraph(steps)).toEqual({
      nodes: [
        { name: "db", inputs: [], outputs: ["url", "password"] },
        { name: "schema", inputs: ["URL", "PW"], outputs: [] },
        { name: "seed", inputs: ["URL", "NAME"], outputs: [] },
      ],
      edges: [{ from: "db", to: "schema", label: "url, password" }, { from: "db", to: "seed", label: "url" }],
    });
  });
});

describe("events", () => {
  it("reads the query: defaults, RFC 3339 bounds, and refuses a bad limit or time naming the field", () => {
    expect(parseEventQuery(new URLSearchParams(""))).toEqual({ sandbox: "", type: "", limit: 500 });
    expect(parseEventQuery(new URLSearchParams("sandbox=a&type=ephemera.sandbox.*&since=2026-01-01T00:00:00Z&limit=3")))
      .toEqual({ sandbox: "a", type: "ephemera.sandbox.*", since: Date.UTC(2026, 0, 1), limit: 3 });
    expect(() => parseEventQuery(new URLSearchParams("limit=0"))).toThrow(/^limit: "0" is not a whole number/);
    expect(() => parseEventQuery(new URLSearchParams("until=yesterday"))).toThrow(/^until: "yesterday" is not an RFC 3339 time/);
  });

  it("asks the API for the query's window (a second early), or for its default window without one", () => {
    const now = Date.parse("2026-01-01T01:00:00Z");
    expect(sinceMs({ since: Date.parse("2026-01-01T00:59:00Z") }, now)).toBe(61_000);
    expect(sinceMs({}, now)).toBe(0);
  });

  it("parses envelopes with their position as seq, keeps those in the window and only the last `limit`", () => {
    expect(eventOf({ json: '{"type":"t","time":"2026-01-01T00:00:05Z","position":7}', position: 7 })).toEqual({ type: "t", time: "2026-01-01T00:00:05Z", position: 7, seq: 7 });
    expect(eventOf({ json: "not json", position: 0 })).toBeUndefined();
    const q = parseEventQuery(new URLSearchParams("since=2026-01-01T00:00:00Z&until=2026-01-01T00:01:00Z&limit=2"));
    const at = (t: string) => ({ time: t });
    expect([at("2025-12-31T23:59:59Z"), at("2026-01-01T00:00:00Z"), at("2026-01-01T00:01:00Z"), at("2026-01-01T00:01:01Z"), {}].map((e) => inWindow(e, q)))
      .toEqual([false, true, true, false, false]);
    const last = new LastEvents(2);
    for (let i = 0; i < 7; i++) last.push({ i });
    expect(last.list()).toEqual([{ i: 5 }, { i: 6 }]);
  });
});

describe("static files", () => {
  it("resolves names under the root and refuses any way out of it", () => {
    expect(fileUnder("/web/assets", "/app-1.js")).toBe("/web/assets/app-1.js");
    for (const path of ["/../index.html", "/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2fsecret", "/a%00.js", "/..\\x", "/%E0%A4%A"]) {
      expect([path, fileUnder("/web/assets", path)]).toEqual([path, undefined]);
    }
  });

  it("prefers br, then gzip, as the browser accepts them", () => {
    expect(acceptedEncodings("gzip, deflate, br")).toEqual(["br", "gzip"]);
    expect(acceptedEncodings("gzip")).toEqual(["gzip"]);
    expect(acceptedEncodings("br;q=0, gzip;q=0.5")).toEqual(["gzip"]);
    expect(acceptedEncodings(undefined)).toEqual([]);
    expect(acceptedEncodings("*")).toEqual(["br", "gzip"]);
  });
});

describe("the session", () => {
  it("reads the token from the Authorization header first, then the cookie", () => {
    expect(requestToken({ authorization: "Bearer t1", cookie: "ephemera_console=t2" })).toBe("t1");
    expect(requestToken({ cookie: "other=1; ephemera_console=t%2F2" })).toBe("t/2");
    expect(requestToken({})).toBeUndefined();
  });

  it("keeps it HttpOnly and SameSite=Strict, Secure over TLS, and clears it", () => {
    expect(sessionCookie("t/1", false)).toBe("ephemera_console=t%2F1; HttpOnly; SameSite=Strict; Path=/");
    expect(sessionCookie("t", true)).toMatch(/; Secure$/);
    expect(clearedCookie(false)).toBe("ephemera_console=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
  });
});

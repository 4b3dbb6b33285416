// The wire protocol's pieces without I/O: control lines read off a stream, targets parsed,
// gRPC statuses mapped to HTTP, dial targets checked, settings read from the environment.
import { PassThrough } from "node:stream";
import { grpc } from "@ephemera/kit";
import { tunnelConfig } from "./config.js";
import { MAX_LINE_BYTES, parseTarget, readLines } from "./protocol.js";
import { httpStatusOf } from "./server/authorize.js";
import { targetProblem } from "./server/dial.js";

describe("the tunnel's protocol", () => {
  it("reads JSON lines split anywhere across chunks, skipping empty ones", () => {
    const stream = new PassThrough();
    const seen: unknown[] = [];
    readLines(stream, (m) => seen.push(m), (err) => seen.push(err.message));
    stream.write('{"type":"hel');
    stream.write('lo"}\n\n{"type":"refresh"}\n{"type"');
    stream.write(':"bye"}\n');
    expect(seen).toEqual([{ type: "hello" }, { type: "refresh" }, { type: "bye" }]);
  });

  it("stops at a line that is not JSON, or one over the bound, saying which", () => {
    const bad = new PassThrough();
    const seen: unknown[] = [];
    readLines(bad, (m) => seen.push(m), (err) => seen.push(err.message));
    bad.write('{"type":"refresh"}\nnot json\n{"type":"bye"}\n');
    expect(seen).toEqual([{ type: "refresh" }, "a control message is not JSON: not json"]);
    const long = new PassThrough();
    const errors: string[] = [];
    readLines(long, () => undefined, (err) => errors.push(err.message));
    long.write("x".repeat(MAX_LINE_BYTES + 1));
    expect(errors).toEqual([`a control message is over ${MAX_LINE_BYTES} bytes`]);
  });

  it("parses host:port targets and refuses anything else", () => {
    expect(parseTarget("backend.demo.svc:8080")).toEqual({ host: "backend.demo.svc", port: 8080 });
    expect(parseTarget("[::1]:80")).toEqual({ host: "::1", port: 80 });
    expect(["backend", "a:0", "a:70000", "a b:80", ":80"].map(parseTarget)).toEqual(Array(5).fill(undefined));
  });

  it("dials Service names and IPs only", () => {
    expect(["backend.demo", "backend.demo.svc", "backend.demo.svc.cluster.local", "10.0.0.7", "::1"].map(targetProblem)).toEqual(Array(5).fill(undefined));
    expect(targetProblem("example.com.evil")).toBe("example.com.evil is neither a Service's name (<svc>.<ns>, <svc>.<ns>.svc, <svc>.<ns>.svc.cluster.local) nor an IP");
    expect(targetProblem("localhost")).toBeDefined();
  });

  it("maps the API's refusals to HTTP statuses, anything else to 503", () => {
    const { status } = grpc;
    expect([status.UNAUTHENTICATED, status.PERMISSION_DENIED, status.NOT_FOUND, status.INVALID_ARGUMENT, status.FAILED_PRECONDITION,
      status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.INTERNAL].map(httpStatusOf)).toEqual([401, 403, 404, 400, 400, 503, 503, 503]);
  });

  it("reads its settings: defaults, the pod address from the listen host, durations", () => {
    const defaults = tunnelConfig({});
    expect([defaults.listen, defaults.podAddress, defaults.api, defaults.refreshMs, defaults.liveness, defaults.acceptTimeoutMs])
      .toEqual(["127.0.0.1:7785", "127.0.0.1", "127.0.0.1:7400", 5_000, { intervalMs: 2_000, timeoutMs: 5_000 }, 10_000]);
    expect(tunnelConfig({ EPHEMERA_TUNNEL_LISTEN: "0.0.0.0:7785" }).podAddress).toBe("127.0.0.1");
    expect(tunnelConfig({ EPHEMERA_TUNNEL_LISTEN: "10.1.2.3:7785" }).podAddress).toBe("10.1.2.3");
    expect(tunnelConfig({ EPHEMERA_TUNNEL_POD_ADDRESS: "10.9.9.9", EPHEMERA_TUNNEL_DNS: "10.96.0.10, 10.96.0.11" }))
      .toMatchObject({ podAddress: "10.9.9.9", dns: ["10.96.0.10", "10.96.0.11"] });
    expect(() => tunnelConfig({ EPHEMERA_TUNNEL_PING: "soon" })).toThrow("EPHEMERA_TUNNEL_PING");
  });
});

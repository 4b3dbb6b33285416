// ephemera-router on HTTP/2 without TLS (h2c), as gRPC talks in a cluster: each call of one
// channel routed by its own routing key, with messages, statuses and trailing metadata
// passed through, a streaming call included.
import { grpc } from "@ephemera/kit/client";
import { waitFor } from "@ephemera/kit";
import { WHO } from "./apps.testkit.js";
import { KEY, ORDERS, startHarness, type Harness } from "./harness.testkit.js";
import { routingRule } from "./routes-server.testkit.js";

let h: Harness;
let client: grpc.Client;

beforeAll(async () => {
  h = await startHarness();
  client = new grpc.Client(`127.0.0.1:${h.listenerOf(h.baseline.grpcPort)}`, grpc.credentials.createInsecure());
  await waitFor(() => h.router.table.ready, { what: "the first rules snapshot" });
});
afterAll(async () => {
  client?.close();
  await h?.stop();
});

const metadata = (headers: Record<string, string>) => {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(headers)) m.set(k, v);
  return m;
};
const keyed = () => metadata({ baggage: `sd-routing-key=${KEY}` });
const deadline = () => ({ deadline: Date.now() + 5_000 });

interface Outcome { value?: string; code: grpc.status; details: string; trailers?: Record<string, unknown> }

function unary(method: keyof typeof WHO, md: grpc.Metadata, on: grpc.Client = client): Promise<Outcome> {
  const { path, requestSerialize, responseDeserialize } = WHO[method];
  return new Promise((resolve) => {
    on.makeUnaryRequest(path, requestSerialize, responseDeserialize, Buffer.alloc(0), md, deadline(), (err, value) => {
      resolve({
        ...(value ? { value: value.toString() } : {}),
        code: err?.code ?? grpc.status.OK, details: err?.details ?? "",
        ...(err ? { trailers: err.metadata.getMap() } : {}),
      });
    });
  });
}

describe("ephemera-router, gRPC over h2c", () => {
  it("routes each call on one channel by its own key: keyed to the fork, the others to the baseline", async () => {
    const answers = [];
    for (const md of [keyed(), metadata({}), metadata({ tracestate: `sd-routing-key=${KEY}` }), metadata({ baggage: "sd-routing-key=unknownkey01" })]) {
      answers.push((await unary("who", md)).value);
    }
    expect(answers).toEqual(["fork", "baseline", "fork", "baseline"]);
  });

  it("passes a failure's status, details and trailing metadata through (a trailers-only answer)", async () => {
    expect(await unary("fail", keyed())).toMatchObject({ code: grpc.status.NOT_FOUND, details: "fork has no such thing", trailers: { "x-app": "fork" } });
    expect(await unary("fail", metadata({}))).toMatchObject({ code: grpc.status.NOT_FOUND, details: "baseline has no such thing", trailers: { "x-app": "baseline" } });
  });

  it("streams a server-streaming call's messages, then its trailers", async () => {
    const { path, requestSerialize, responseDeserialize } = WHO.count;
    const stream = (md: grpc.Metadata) => new Promise<{ messages: string[]; code: grpc.status; trailers: Record<string, unknown> }>((resolve) => {
      const messages: string[] = [];
      const call = client.makeServerStreamRequest(path, requestSerialize, responseDeserialize, Buffer.alloc(0), md, deadline());
      call.on("data", (m: Buffer) => messages.push(m.toString()));
      call.on("error", () => undefined);
      call.on("status", (s: grpc.StatusObject) => resolve({ messages, code: s.code, trailers: s.metadata.getMap() }));
    });
    expect(await stream(keyed())).toEqual({ messages: ["fork-1", "fork-2", "fork-3"], code: grpc.status.OK, trailers: { "x-app": "fork" } });
    expect(await stream(metadata({}))).toMatchObject({ messages: ["baseline-1", "baseline-2", "baseline-3"], code: grpc.status.OK });
  });

  it("passes a client's cancel on to the app the call went to", async () => {
    const { path, requestSerialize, responseDeserialize } = WHO.hold;
    const call = client.makeServerStreamRequest(path, requestSerialize, responseDeserialize, Buffer.alloc(0), keyed(), deadline());
    call.on("error", () => undefined);
    const first = await new Promise<string>((resolve) => call.once("data", (m: Buffer) => resolve(m.toString())));
    expect(first).toBe("fork-held");
    const before = h.fork.cancelled;
    call.cancel();
    await waitFor(() => h.fork.cancelled === before + 1, { what: "the fork's call cancelled" });
    expect(h.baseline.cancelled).toBe(0);
  });

  it("answers UNAVAILABLE when the fork cannot be reached, and goes on serving the baseline", async () => {
    h.routes.set(routingRule(ORDERS, "gonefork0001", { [h.baseline.grpcPort]: { host: "127.0.0.1", port: 1 } }));
    await waitFor(() => h.router.table.forkFor("gonefork0001", h.baseline.grpcPort), { what: "the rule of gonefork0001" });
    const gone = await unary("who", metadata({ baggage: "sd-routing-key=gonefork0001" }));
    expect(gone.code).toBe(grpc.status.UNAVAILABLE);
    expect(gone.details).toContain("502");
    expect((await unary("who", metadata({}))).value).toBe("baseline");
  });

  it("sends the key's calls to the baseline once its rule is removed", async () => {
    h.routes.remove(h.rule);
    await waitFor(async () => (await unary("who", keyed())).value === "baseline", { what: "the keyed call on the baseline" });
    h.routes.set(h.rule);
    await waitFor(async () => (await unary("who", keyed())).value === "fork", { what: "the keyed call on the fork again" });
  });
});

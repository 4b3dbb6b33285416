// Route groups on the real sandbox service and NATS: a group's routing key routes to the forks
// of the sandboxes its match selects, through the Routes API's watch and the preview gateway,
// and follows the sandboxes' labels, the group's own updates and the sandboxes' deletion.
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import { call, createLogger, grpc, waitFor, ValidationError, NotFoundError } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev } from "@ephemera/events";
import { JetStreamEventStore, connectNats, type EventStore } from "@ephemera/eventstore";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

const logger = createLogger("routegroup-test", "silent");
const nats = testNats("rg");
const DOMAIN = "preview.test";

type Rule = pb.routes.WorkloadRoutingRule;

describe("a route group", () => {
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let store: EventStore;
  let sandboxes: pb.SandboxServiceClient;
  let groups: pb.RouteGroupServiceClient;
  let routes: pb.routes.RoutesClient;
  let target: Server;
  let seen: IncomingHttpHeaders[];

  beforeAll(async () => {
    seen = [];
    target = createServer((req, res) => { seen.push(req.headers); res.end("from the frontend"); });
    await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: DOMAIN,
      routes: { listen: "127.0.0.1:0", httpListen: "127.0.0.1:0" }, gateway: { listen: "127.0.0.1:0" },
    }, logger);
    nc = await connectNats(nats.url, "rg-test-runner");
    store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
    const api = `127.0.0.1:${service.port}`;
    sandboxes = new pb.SandboxServiceClient(api, grpc.credentials.createInsecure());
    groups = new pb.RouteGroupServiceClient(api, grpc.credentials.createInsecure());
    routes = new pb.routes.RoutesClient(`127.0.0.1:${service.routes!.port}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    sandboxes?.close();
    groups?.close();
    routes?.close();
    await service?.stop();
    await new Promise<void>((resolve) => target?.close(() => resolve()));
    await nats.cleanup(nc);
    await nc?.close();
  });

  const applyGroup = (doc: unknown, dryRun = false) => call(groups.apply.bind(groups), { routeGroup: pb.RouteGroup.fromJSON(doc), dryRun });
  const getGroup = (name: string) => call(groups.get.bind(groups), { name });
  const group = (match: unknown, cluster = "c1") => ({
    name: "feature-x",
    spec: { cluster, description: "feature x", match, endpoints: [{ name: "web", target: `http://127.0.0.1:${(target.address() as { port: number }).port}` }] },
  });

  /** A sandbox forking one baseline, made ready as its cluster's runner would report it. */
  const readySandbox = async (name: string, labels: Record<string, string>, baseline: string) => {
    const sandbox = pb.Sandbox.fromJSON({ name, spec: { cluster: "c1", labels, forks: [{ forkOf: { kind: "Deployment", namespace: "shop", name: baseline } }] } });
    const { sandbox: view } = await call(sandboxes.apply.bind(sandboxes), { sandbox, dryRun: false });
    const routingKey = view!.routingKey;
    await waitFor(async () => (await store.read(Aggregates.sandbox, name)).events.some((e) => decode(e)?.type === "ephemera.sandbox.forks_requested.v1"),
      { timeoutMs: 10_000, what: `the forks of ${name} asked for` });
    const asRunner = async (e: ReturnType<typeof ev>) => {
      const current = await store.read(Aggregates.forks, routingKey);
      await store.append(Aggregates.forks, routingKey, { revision: current.revision, version: current.version }, [encode(e)], { source: "runner" });
    };
    await asRunner(ev("ephemera.forks.applied.v1", {
      sandbox: name, generation: 1, forks: [{
        fork: `Deployment shop/${baseline}`, baseline: { kind: "Deployment", namespace: "shop", name: baseline },
        workload: { kind: "Deployment", namespace: "shop", name: `${baseline}-${routingKey}` },
        services: [{ host: `${baseline}-${routingKey}.shop.svc`, ports: [8080], baselineHost: `${baseline}.shop.svc` }],
      }],
    }));
    await asRunner(ev("ephemera.forks.available.v1", { sandbox: name, generation: 1 }));
    await waitFor(async () => (await call(sandboxes.get.bind(sandboxes), { name, showOutputs: false })).status?.ready === true,
      { timeoutMs: 10_000, what: `sandbox ${name} ready` });
    return routingKey;
  };

  /** A watch of the rules under one routing key: the rules now, kept up to date. */
  const watchRules = (routingKey: string) => {
    const rules = new Map<string, Rule>();
    let synced = false;
    const stream = routes.watchWorkloadRoutingRules(pb.routes.WorkloadRoutingRulesRequest.fromPartial({ routingKey }));
    stream.on("data", (op: pb.routes.WorkloadRoutingRuleOp) => {
      if (op.op === pb.routes.WatchOp.SYNCED) synced = true;
      const key = `${op.route?.baseline?.name}`;
      if (op.op === pb.routes.WatchOp.ADD || op.op === pb.routes.WatchOp.REPLACE) rules.set(key, op.route!);
      if (op.op === pb.routes.WatchOp.REMOVE) rules.delete(key);
    });
    stream.on("error", () => undefined);
    const routed = () => Object.fromEntries([...rules].sort(([a], [b]) => a.localeCompare(b)).map(([baseline, r]) => [baseline, r.destinationSandbox?.name]));
    return {
      routed,
      until: (want: Record<string, string>, what: string) =>
        waitFor(async () => {
          if (!synced || JSON.stringify(routed()) !== JSON.stringify(want)) throw new Error(`routed: ${JSON.stringify(routed())}`);
          return true;
        }, { timeoutMs: 10_000, what }),
      rule: (baseline: string) => rules.get(baseline),
      stop: () => stream.cancel(),
    };
  };

  it("routes, under its own key, to the forks of the sandboxes its match selects, as their labels and its match change", async () => {
    const xKey = await readySandbox("sb-x", { feature: "x-backend" }, "orders");
    await readySandbox("sb-other", { team: "other" }, "cart");

    const created = await applyGroup(group({ label: { key: "feature", value: "x-*" } }));
    expect(created.created).toBe(true);
    const key = created.routeGroup!.routingKey;
    expect(key).not.toBe(xKey);
    const watch = watchRules(key);
    try {
      await watch.until({ orders: "sb-x" }, "the group's key routed to sb-x's fork only");
      expect(watch.rule("orders")?.mappings).toEqual([{ workloadPort: 8080, destinations: [{ host: `orders-${xKey}.shop.svc`, port: 8080 }] }]);

      const view = await getGroup("feature-x");
      expect(view.status).toEqual({ ready: true, reason: "Ready", message: "" });
      expect(view.sandboxes.map((s) => [s.name, s.ready, s.routed])).toEqual([["sb-x", true, ["Deployment shop/orders"]]]);
      expect(view.endpoints.map((e) => e.url)).toEqual([`https://web--${key}.${DOMAIN}`]);

      // The match may change: the other sandbox joins.
      const updated = await applyGroup(group({ any: [{ label: { key: "feature", value: "x-*" } }, { label: { key: "team", value: "other" } }] }));
      expect(updated).toMatchObject({ created: false, unchanged: false });
      expect(updated.changes.map((c) => c.field)).toEqual(["spec.match"]);
      expect(updated.routeGroup!.routingKey).toBe(key);
      await watch.until({ cart: "sb-other", orders: "sb-x" }, "the second sandbox joined by the new match");

      // A sandbox relabelled out of the match leaves it.
      const relabelled = pb.Sandbox.fromJSON({ name: "sb-other", spec: { cluster: "c1", labels: { team: "elsewhere" }, forks: [{ forkOf: { kind: "Deployment", namespace: "shop", name: "cart" } }] } });
      await call(sandboxes.apply.bind(sandboxes), { sandbox: relabelled, dryRun: false });
      await watch.until({ orders: "sb-x" }, "the relabelled sandbox left");

      // A sandbox deleted leaves it too.
      await call(sandboxes.delete.bind(sandboxes), { name: "sb-x", force: false });
      await watch.until({}, "the deleted sandbox's rules removed");
      expect((await getGroup("feature-x")).sandboxes).toEqual([]);
      expect((await getGroup("feature-x")).status?.reason).toBe("NoMatchingSandbox");
    } finally {
      watch.stop();
    }
  });

  it("routes neither of two matching sandboxes that fork the same baseline, and says so", async () => {
    await readySandbox("sb-a", { feature: "x-a" }, "payments");
    const key = (await applyGroup(group({ label: { key: "feature", value: "x-*" } }))).routeGroup!.routingKey;
    const watch = watchRules(key);
    try {
      await watch.until({ payments: "sb-a" }, "sb-a routed");
      await readySandbox("sb-b", { feature: "x-b" }, "payments");
      await watch.until({}, "the conflicting baseline no longer routed");
      const view = await getGroup("feature-x");
      expect(view.conflicts).toEqual([{ baseline: "Deployment shop/payments", sandboxes: ["sb-a", "sb-b"] }]);
      expect(view.status).toMatchObject({ ready: false, reason: "Conflict" });
      expect(view.status!.message).toContain("Deployment shop/payments is forked (or served locally) by sb-a and sb-b");
      // Each sandbox still routes under its own key.
      const own = await call(routes.getWorkloadRoutingRules.bind(routes), pb.routes.WorkloadRoutingRulesRequest.fromPartial({ destinationSandbox: { name: "sb-b" } }));
      expect(own.routingRules.map((r) => r.routingKey)).not.toContain(key);
      expect(own.routingRules).toHaveLength(1);
    } finally {
      watch.stop();
    }
  });

  it("serves its endpoints through the preview gateway with its routing key", async () => {
    const view = await getGroup("feature-x");
    const url = new URL(view.endpoints[0]!.url);
    seen.length = 0;
    const body = await new Promise<string>((resolve, reject) => {
      request({ host: "127.0.0.1", port: service.gateway!.port, path: "/", headers: { host: url.hostname } }, (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (d: string) => { text += d; }).on("end", () => resolve(text));
      }).on("error", reject).end();
    });
    expect(body).toBe("from the frontend");
    expect(seen[0]?.["ot-baggage-sd-routing-key"]).toBe(view.routingKey);
  });

  it("refuses a change of any field but match and endpoints, naming each in one error, and writes nothing", async () => {
    const before = await store.position();
    const changed = group({ label: { key: "feature", value: "x-*" } }, "c2");
    const err = await applyGroup({ ...changed, spec: { ...changed.spec, description: "other" } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).violations.map((v) => [v.field, v.rule])).toEqual([["spec.cluster", "immutable"], ["spec.description", "immutable"]]);
    expect(await store.position()).toBe(before);
  });

  it("is deleted, with an event, and is then not found", async () => {
    const deleted = await call(groups.delete.bind(groups), { name: "feature-x" });
    expect(deleted.status?.reason).toBe("Deleted");
    await expect(getGroup("feature-x")).rejects.toBeInstanceOf(NotFoundError);
    const types = (await store.read(Aggregates.routegroup, "feature-x")).events.map((e) => e.type);
    expect(types).toEqual([
      "ephemera.routegroup.created.v1", "ephemera.routegroup.updated.v1", "ephemera.routegroup.updated.v1", "ephemera.routegroup.deleted.v1",
    ]);
    expect((await call(groups.list.bind(groups), {})).routeGroups).toEqual([]);
    // Applied again under its name: a new group, under a new routing key, as one never made.
    const before = (await store.read(Aggregates.routegroup, "feature-x")).events;
    const again = await applyGroup(group({ label: { key: "feature", value: "x-*" } }));
    expect(again.created).toBe(true);
    expect((await getGroup("feature-x")).routingKey).toBe(again.routeGroup!.routingKey);
    const oldKey = (decode(before[0]!)!.data as { routingKey: string }).routingKey;
    expect(again.routeGroup!.routingKey).not.toBe(oldKey);
    await call(groups.delete.bind(groups), { name: "feature-x" });
    await expect(getGroup("feature-x")).rejects.toBeInstanceOf(NotFoundError);
  });
});

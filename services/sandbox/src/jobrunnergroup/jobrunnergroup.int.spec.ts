// Job runner groups on the real sandbox service and NATS, behind bearer tokens: only an
// admin applies or deletes one, a viewer reads them; an apply is validated, creates, then
// updates what may change and refuses what may not; the events carry the spec. Its status
// follows the runner's reports of its ready pods (jobpods.<group>).
import { createLogger, grpc, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev } from "@ephemera/events";
import { JetStreamEventStore, connectNats, type EventStore } from "@ephemera/eventstore";
import { TOKENS, tokensAccess } from "../../../../test/support/api-tokens.js";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

const logger = createLogger("jrg-test", "silent");
const nats = testNats("jrg");

const group = (edit: (spec: Record<string, unknown>) => void = () => {}) => {
  const spec: Record<string, unknown> = {
    cluster: "local", namespace: "ephemera-jobs", jobTimeout: "30m", image: "ubuntu:24.04",
    podTemplate: JSON.stringify({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } }),
    scaling: { manual: { desiredPods: 2 } },
  };
  edit(spec);
  return pb.JobRunnerGroup.fromJSON({ name: "e2e-runners", spec });
};

describe("a job runner group", () => {
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let store: EventStore;
  let groups: pb.JobRunnerGroupServiceClient;

  beforeAll(async () => {
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      access: tokensAccess(),
    }, logger);
    nc = await connectNats(nats.url, "jrg-test");
    store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
    groups = new pb.JobRunnerGroupServiceClient(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    groups?.close();
    await service?.stop();
    await nats.cleanup(nc);
    await nc?.close();
  });

  const as = (role: keyof typeof TOKENS) => {
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${TOKENS[role]}`);
    return metadata;
  };
  const apply = (role: keyof typeof TOKENS, g: pb.JobRunnerGroup, dryRun = false) =>
    new Promise<pb.ApplyJobRunnerGroupResponse>((resolve, reject) =>
      groups.apply({ jobRunnerGroup: g, dryRun }, as(role), (err, res) => (err ? reject(err) : resolve(res))));
  const get = (role: keyof typeof TOKENS, name: string) =>
    new Promise<pb.JobRunnerGroupView>((resolve, reject) => groups.get({ name }, as(role), (err, res) => (err ? reject(err) : resolve(res))));
  const list = (role: keyof typeof TOKENS) =>
    new Promise<pb.JobRunnerGroupView[]>((resolve, reject) => groups.list({}, as(role), (err, res) => (err ? reject(err) : resolve(res.jobRunnerGroups))));
  const del = (role: keyof typeof TOKENS, name: string) =>
    new Promise<pb.JobRunnerGroupView>((resolve, reject) => groups.delete({ name }, as(role), (err, res) => (err ? reject(err) : resolve(res))));
  const types = async () => (await store.read(Aggregates.jobrunnergroup, "e2e-runners")).events.map((e) => decode(e)?.type);

  it("is an admin's to create: an editor is refused and nothing is written", async () => {
    await expect(apply("editor", group())).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED });
    expect(await types()).toEqual([]);
  });

  it("is validated with the file's rules", async () => {
    const err = await apply("admin", group((s) => { s.scaling = { manual: { desiredPods: 0 } }; })).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect((err as grpc.ServiceError).details).toContain("desiredPods");
    expect(await types()).toEqual([]);
  });

  it("is created by an admin, Pending until the runner reports its pods, and read by a viewer", async () => {
    const dry = await apply("admin", group(), true);
    expect(dry).toMatchObject({ created: true, unchanged: false });
    expect(await types()).toEqual([]);

    const res = await apply("admin", group());
    expect(res).toMatchObject({ created: true, unchanged: false, changes: [] });
    expect(res.jobRunnerGroup?.status).toMatchObject({ ready: false, reason: "Pending", desiredPods: 2 });
    const view = await get("viewer", "e2e-runners");
    expect(view.spec?.image).toBe("ubuntu:24.04");
    expect(JSON.parse(view.spec!.podTemplate)).toEqual({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } });
    expect((await list("viewer")).map((g) => g.name)).toEqual(["e2e-runners"]);
    const [created] = (await store.read(Aggregates.jobrunnergroup, "e2e-runners")).events.map(decode);
    expect(created?.type).toBe("ephemera.jobrunnergroup.created.v1");
    expect(created?.data).toMatchObject({ name: "e2e-runners", spec: { cluster: "local", scaling: { manual: { desiredPods: 2 } } } });
  });

  it("changes its image and pods, not its namespace; the same file again changes nothing", async () => {
    expect(await apply("admin", group())).toMatchObject({ created: false, unchanged: true });
    const moved = await apply("admin", group((s) => { s.namespace = "elsewhere"; })).catch((e: unknown) => e);
    expect(moved).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect((moved as grpc.ServiceError).details).toContain("spec.namespace cannot change");

    const res = await apply("admin", group((s) => { s.image = "ubuntu:25.04"; s.scaling = { manual: { desiredPods: 3 } }; }));
    expect(res).toMatchObject({ created: false, unchanged: false });
    expect(res.changes.map((c) => c.field)).toEqual(["spec.image", "spec.scaling"]);
    expect((await get("viewer", "e2e-runners")).status?.desiredPods).toBe(3);
    expect(await types()).toEqual(["ephemera.jobrunnergroup.created.v1", "ephemera.jobrunnergroup.updated.v1"]);
  });

  it("is Ready once the runner reports desiredPods ready pods, Pending again when one goes", async () => {
    // As the runner of the cluster writes them, on its own aggregate.
    const report = async (pods: string[]) => {
      const current = await store.read(Aggregates.jobpods, "e2e-runners");
      await store.append(Aggregates.jobpods, "e2e-runners", current, [encode(ev("ephemera.jobrunnergroup.pods_reported.v1", { ready: pods.length, pods }))], { source: "runner" });
    };
    const status = async (message: string) => {
      await waitFor(async () => (await get("viewer", "e2e-runners")).status?.message === message, { timeoutMs: 5000, what: `status "${message}"` });
      return (await get("viewer", "e2e-runners")).status;
    };
    expect((await get("viewer", "e2e-runners")).status).toMatchObject({ reason: "Pending", message: "waiting for the runner of cluster local to report 3 ready pods" });
    await report(["p-a", "p-b"]);
    expect(await status("2/3 pods ready")).toEqual({ ready: false, reason: "Pending", message: "2/3 pods ready", desiredPods: 3, readyPods: 2, pods: ["p-a", "p-b"] });
    await report(["p-a", "p-b", "p-c"]);
    expect(await status("3/3 pods ready")).toEqual({ ready: true, reason: "Ready", message: "3/3 pods ready", desiredPods: 3, readyPods: 3, pods: ["p-a", "p-b", "p-c"] });
    expect((await list("viewer"))[0]?.status).toMatchObject({ ready: true, reason: "Ready", pods: ["p-a", "p-b", "p-c"] });
    await report(["p-b", "p-c"]);
    expect(await status("2/3 pods ready")).toMatchObject({ ready: false, reason: "Pending", pods: ["p-b", "p-c"] });
    // Fewer pods wanted: the same two are enough.
    const res = await apply("admin", group((s) => { s.image = "ubuntu:25.04"; s.scaling = { manual: { desiredPods: 2 } }; }));
    expect(res.jobRunnerGroup?.status).toMatchObject({ ready: true, reason: "Ready", message: "2/2 pods ready", pods: ["p-b", "p-c"] });
  });

  it("is an admin's to delete; then it is gone", async () => {
    await expect(del("editor", "e2e-runners")).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED });
    expect((await del("admin", "e2e-runners")).status?.reason).toBe("Deleted");
    await expect(get("viewer", "e2e-runners")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    expect(await list("viewer")).toEqual([]);
    await expect(del("admin", "e2e-runners")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    expect((await types()).at(-1)).toBe("ephemera.jobrunnergroup.deleted.v1");
  });
});

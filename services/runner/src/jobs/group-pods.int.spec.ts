// The job runner groups' pods on the simulated API server (in this process) and the
// in-memory event store: desiredPods pods built from the group's template and image with
// the job agent, each with its token Secret; a pod deleted by hand is replaced; the count
// follows an update; a new spec replaces the pods; the group's deletion removes them all.
// The group's ready pods are reported on jobpods.<group> as they change, and only then.
// Of two runners of the cluster, only the holder of the lease jobpods-<cluster> keeps them.
// A deleted group leaves memory, and its report once it says no pod is ready.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, type DomainEvent } from "@ephemera/events";
import { InMemoryEventStore, InMemoryLeaseStore } from "@ephemera/eventstore";
import { startKubeSim, type KubeSim } from "@ephemera/kube-sim";
import { createLogger, signingKey, verifyPodCapability, waitFor } from "@ephemera/kit";
import { ApiCalls } from "../driver/kube/calls.js";
import { GroupPods } from "./group-pods.js";
import { GROUP_LABEL, JOB_AGENT_DIR } from "./pod.js";

const logger = createLogger("test", "silent");
const KEY = signingKey(Buffer.alloc(32, 7));

async function append(store: InMemoryEventStore, id: string, events: DomainEvent[]): Promise<void> {
  const current = await store.read(Aggregates.jobrunnergroup, id);
  await store.append(Aggregates.jobrunnergroup, id, { revision: current.revision, version: current.version }, events.map(encode), { source: "test" });
}

describe("job runner groups' pods on a Kubernetes cluster", () => {
  let sim: KubeSim;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let pods: GroupPods | undefined;
  const namespace = `jobs-${process.pid}`;
  beforeAll(async () => {
    sim = await startKubeSim({ listen: "127.0.0.1:0", runtime: "process", kubeconfigPath: join(mkdtempSync(join(tmpdir(), "jobpods-int-")), "kubeconfig") });
    kc = new k8s.KubeConfig();
    kc.loadFromFile(sim.kubeconfigPath);
    core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });
  afterEach(async () => pods?.stop());
  afterAll(async () => sim?.stop());

  const spec = (desiredPods: number, image = "builder:1") => pb.JobRunnerGroupSpec.fromPartial({
    cluster: "c1", namespace, image, labels: { team: "web" },
    podTemplate: JSON.stringify({
      metadata: { labels: { app: "runner" } },
      spec: { containers: [{ name: "work", image: "ignored", command: ["sleep"], args: ["1"], env: [{ name: "FROM_TEMPLATE", value: "yes" }] }] },
    }),
    scaling: { manual: { desiredPods } },
  });
  const groupPods = async (group: string) =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${GROUP_LABEL}=${group}` })).items.filter((p) => !p.metadata?.deletionTimestamp);
  const names = async (group: string) => (await groupPods(group)).map((p) => p.metadata!.name!).sort();
  const reports = async (store: InMemoryEventStore, group: string) => (await store.read(Aggregates.jobpods, group)).events.map((e) => decode(e)!)
    .flatMap((e) => e.type === "ephemera.jobrunnergroup.pods_reported.v1" ? [e.data] : []);
  const reported = (store: InMemoryEventStore, group: string, ready: (pods: string[]) => boolean, what: string) =>
    waitFor(async () => { const last = (await reports(store, group)).at(-1); return !!last && ready(last.pods); }, { timeoutMs: 15_000, what });
  const count = (group: string, n: number) =>
    waitFor(async () => (await groupPods(group)).length === n, { timeoutMs: 15_000, what: `${n} pod(s) of ${group}` });

  it("keeps desiredPods pods, replaces one deleted by hand, follows an update, and removes them with the group", async () => {
    const store = new InMemoryEventStore();
    await append(store, "builders", [ev("ephemera.jobrunnergroup.created.v1", { name: "builders", spec: spec(2) })]);
    // Another cluster's group gets no pod here.
    await append(store, "elsewhere", [ev("ephemera.jobrunnergroup.created.v1", { name: "elsewhere", spec: { ...spec(1), cluster: "c2" } })]);
    pods = new GroupPods({
      store, kubeconfig: kc, calls: new ApiCalls(), clusterName: "c1", prefix: "t1", agentImage: "ephemera/agent:test",
      podJobs: "sandbox.ephemera:7400", signingKey: KEY, logger,
    });
    await pods.start();
    await count("builders", 2);
    const [first, second] = await groupPods("builders");
    // The pod: the group's image as the template's first container, running the job agent copied in by the init container.
    const main = first!.spec!.containers[0]!;
    expect(main).toMatchObject({ name: "work", image: "builder:1", command: [`${JOB_AGENT_DIR}/node`, `${JOB_AGENT_DIR}/agent.cjs`, "job-agent"] });
    expect(main.args).toBeUndefined();
    const env = Object.fromEntries(main.env!.map((e) => [e.name, e.value ?? e.valueFrom?.secretKeyRef?.name]));
    expect(env).toEqual({
      FROM_TEMPLATE: "yes", EPHEMERA_POD_JOBS: "sandbox.ephemera:7400", EPHEMERA_JOB_GROUP: "builders",
      EPHEMERA_POD_NAME: first!.metadata!.name, EPHEMERA_POD_TOKEN: first!.metadata!.name,
    });
    expect(first!.spec!.initContainers![0]).toMatchObject({ name: "ephemera-job-agent-init", image: "ephemera/agent:test" });
    expect(first!.metadata!.labels).toMatchObject({ app: "runner", team: "web", [GROUP_LABEL]: "builders", "ephemera.dev/prefix": "t1" });
    // Each pod's token names its group and itself.
    for (const p of [first!, second!]) {
      const secret = await core.readNamespacedSecret({ name: p.metadata!.name!, namespace });
      const token = Buffer.from(secret.data!["token"]!, "base64").toString();
      expect(await verifyPodCapability([KEY], token, "builders")).toEqual({ group: "builders", pod: p.metadata!.name });
      expect(secret.metadata!.ownerReferences).toEqual([expect.objectContaining({ kind: "Pod", name: p.metadata!.name, uid: p.metadata!.uid })]);
    }
    expect(await groupPods("elsewhere")).toEqual([]);

    // Both Running and ready: reported, by name, and each change once (never the same twice in a row).
    const both = [first!.metadata!.name!, second!.metadata!.name!].sort();
    await reported(store, "builders", (p) => p.join() === both.join(), "2 ready pods reported");
    expect((await reports(store, "builders")).at(-1)).toEqual({ ready: 2, pods: both });
    expect((await store.read(Aggregates.jobpods, "elsewhere")).events).toEqual([]);
    const before = (await reports(store, "builders")).length;

    // Deleted by hand: another takes its place.
    await core.deleteNamespacedPod({ name: first!.metadata!.name!, namespace });
    await waitFor(async () => {
      const now = await names("builders");
      return now.length === 2 && !now.includes(first!.metadata!.name!) && now.includes(second!.metadata!.name!);
    }, { timeoutMs: 15_000, what: "the deleted pod to be replaced" });
    // The count dips (the deleted one no longer ready) and comes back with its replacement.
    const replaced = await names("builders");
    await reported(store, "builders", (p) => p.join() === replaced.join(), "the replacement reported ready");
    const since = (await reports(store, "builders")).slice(before);
    expect(since.some((r) => r.ready < 2 && !r.pods.includes(first!.metadata!.name!))).toBe(true);
    expect(since.at(-1)).toEqual({ ready: 2, pods: replaced });
    const all = await reports(store, "builders");
    for (let i = 1; i < all.length; i++) expect(all[i]!.pods).not.toEqual(all[i - 1]!.pods);
    for (const r of all) expect(r.ready).toBe(r.pods.length);

    // The count follows the group's updates, up and down.
    await append(store, "builders", [ev("ephemera.jobrunnergroup.updated.v1", { spec: spec(3), changes: [] })]);
    await count("builders", 3);
    const three = await names("builders");
    await append(store, "builders", [ev("ephemera.jobrunnergroup.updated.v1", { spec: spec(1), changes: [] })]);
    await count("builders", 1);
    expect(three).toContain((await names("builders"))[0]);

    // A new image: the pod is replaced by one of the new spec.
    await append(store, "builders", [ev("ephemera.jobrunnergroup.updated.v1", { spec: spec(1, "builder:2"), changes: [] })]);
    await waitFor(async () => {
      const now = await groupPods("builders");
      return now.length === 1 && now[0]!.spec!.containers[0]!.image === "builder:2";
    }, { timeoutMs: 15_000, what: "the pod of the new image" });

    // Deleted: none left, nor their token Secrets.
    await append(store, "builders", [ev("ephemera.jobrunnergroup.deleted.v1", {})]);
    await count("builders", 0);
    await waitFor(async () => (await core.listNamespacedSecret({ namespace, labelSelector: `${GROUP_LABEL}=builders` })).items.length === 0,
      { timeoutMs: 15_000, what: "the token Secrets to be gone" });
    await reported(store, "builders", (p) => p.length === 0, "no ready pod reported once the group is deleted");
    // The deleted group left memory at once; its report once it said no pod is ready.
    await waitFor(() => pods!.reports.get("builders") === undefined, { timeoutMs: 15_000, what: "the deleted group's last report to leave memory" });
    expect([...pods!.groups.entries()].map(([name]) => name)).toEqual(["elsewhere"]);
  });
  it("of two runners of the cluster, only the lease's holder keeps the pods; the other takes over when it stops, without doubling them", async () => {
    const store = new InMemoryEventStore();
    const leases = new InMemoryLeaseStore();
    await append(store, "pair", [ev("ephemera.jobrunnergroup.created.v1", { name: "pair", spec: spec(2) })]);
    const replica = () => new GroupPods({
      store, kubeconfig: kc, calls: new ApiCalls(), clusterName: "c1", prefix: "t1", agentImage: "ephemera/agent:test",
      podJobs: "sandbox.ephemera:7400", signingKey: KEY, logger, leases, leaseTtlMs: 600,
    });
    const a = replica();
    const b = replica();
    try {
      await a.start();
      await b.start();
      await waitFor(() => a.reconciling !== b.reconciling, { what: "one of the two to hold the lease" });
      const [holder, other] = a.reconciling ? [a, b] : [b, a];
      await count("pair", 2);
      const before = await names("pair");
      expect(other.reconciling).toBe(false);
      // The other does nothing meanwhile: an update is followed by the holder alone, to exactly 3.
      await append(store, "pair", [ev("ephemera.jobrunnergroup.updated.v1", { spec: spec(3), changes: [] })]);
      await count("pair", 3);
      // The holder goes (releasing the lease): the other takes over and keeps the same pods, then follows the next update.
      await holder.stop();
      await waitFor(() => other.reconciling, { what: "the other runner to take the lease" });
      await append(store, "pair", [ev("ephemera.jobrunnergroup.updated.v1", { spec: spec(1), changes: [] })]);
      await count("pair", 1);
      expect(before.length).toBe(2);
      await append(store, "pair", [ev("ephemera.jobrunnergroup.deleted.v1", {})]);
      await count("pair", 0);
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});

// Services on the simulated cluster: ClusterIPs and Endpoints from the API under either
// runtime; under the docker runtime, packets routed to them (from pods and from this
// machine), cluster DNS in pods and for host processes, and the iptables rules of a killed
// kube-sim removed at the next start. Every address traffic goes to is a pod's on Docker's
// bridge or a ClusterIP this machine's iptables turns into one; the service range's other
// addresses are rejected here, never sent off the machine.
import type { V1Endpoints, V1Pod } from "@kubernetes/client-node";
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { createSocket } from "node:dgram";
import { promises as dns } from "node:dns";
import { mkdtempSync } from "node:fs";
import { get } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import dnsPacket, { type DecodedPacket } from "dns-packet";
import { startKubeSimProcess } from "./child.js";
import { fresh, pod, podWhere, startHarness, waitFor, type Harness } from "./sim.testkit.js";
import { startKubeSim } from "./start.js";

const NODE = "ephemera/node:20.20.2";
const dockerAnswers = spawnSync("docker", ["info"], { timeout: 20_000, stdio: "ignore" }).status === 0;
if (!dockerAnswers) console.warn("kube-sim network: Docker does not answer here, so only the API's part (ClusterIPs, Endpoints) runs");

const SERVER = "require('http').createServer((q, s) => s.end(process.env.HOSTNAME)).listen(8080)";
const labelled = (p: V1Pod, app: string): V1Pod => ({ ...p, metadata: { ...p.metadata, labels: { app } } });
/** A pod of `app` answering HTTP on its named port `http` (8080) with its own name. */
const server = (name: string, app: string): V1Pod => labelled(pod(name, {
  restartPolicy: "Always",
  containers: [{ name: "main", image: NODE, command: ["node", "-e", SERVER], ports: [{ name: "http", containerPort: 8080 }] }],
}), app);

const addresses = (ep: V1Endpoints | undefined) => (ep?.subsets ?? []).flatMap((s) => (s.addresses ?? []).map((a) => a.ip)).sort();

async function endpointsWith(h: Harness, name: string, count: number): Promise<string[]> {
  return waitFor(`${count} ready address(es) in Endpoints ${name}`, async () => {
    const ips = addresses(await h.core.readNamespacedEndpoints({ name, namespace: h.ns }).catch(() => undefined));
    return ips.length === count ? ips : undefined;
  }, 30_000);
}

async function createService(h: Harness, name: string, app: string, extra: Record<string, unknown> = {}) {
  return h.core.createNamespacedService({ namespace: h.ns, body: {
    metadata: { name }, spec: { selector: { app }, ports: [{ name: "web", port: 80, targetPort: "http" }], ...extra },
  } });
}

/** One HTTP GET on a connection of its own, so each one is balanced anew: the body, or the error's code. */
const fetchOnce = (url: string) => new Promise<string>((resolve) => {
  const req = get(url, { agent: false, timeout: 5000 }, (res) => {
    let body = "";
    res.on("data", (d: Buffer) => { body += d.toString(); });
    res.on("end", () => resolve(body));
  });
  req.on("timeout", () => req.destroy(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" })));
  req.on("error", (err: NodeJS.ErrnoException) => resolve(`ERR ${err.code ?? err.message}`));
});

describe("Services under the process runtime", () => {
  let h: Harness;
  beforeAll(async () => { h = await startHarness({ runtime: "process" }); });
  afterAll(async () => { await h?.sim.stop(); });

  it("get ClusterIPs and Endpoints from the API, and are said not to be routed", async () => {
    expect(h.sim.network).toMatchObject({ routed: false, serviceRange: "10.96.0.0/16", dnsServer: undefined });
    expect(h.sim.dnsServer).toBeUndefined();
    const app = fresh("proc");
    const svc = await createService(h, app, app);
    expect(svc.spec?.clusterIP).toMatch(/^10\.96\.\d+\.\d+$/);
    const name = fresh("srv");
    await h.core.createNamespacedPod({ namespace: h.ns, body: labelled({ metadata: { name }, spec: {
      containers: [{ name: "main", image: "busybox", command: ["sleep", "300"], ports: [{ name: "http", containerPort: 8080 }] }],
    } }, app) });
    // The process runtime's pods are on the host's network: 127.0.0.1 is their IP.
    expect(await endpointsWith(h, app, 1)).toEqual(["127.0.0.1"]);
    const ep = await h.core.readNamespacedEndpoints({ name: app, namespace: h.ns });
    expect(ep.subsets?.[0]?.ports).toEqual([{ name: "web", port: 8080, protocol: "TCP" }]);
    await h.core.deleteNamespacedService({ name: app, namespace: h.ns });
    await waitFor("the Endpoints gone with the Service", async () => !(await h.core.readNamespacedEndpoints({ name: app, namespace: h.ns }).catch(() => undefined)));
  });
});

if (dockerAnswers) describe("Services under the docker runtime", () => {
  let h: Harness;
  // A resolver of the "machine's" own, on loopback, so forwarding is seen without any outside name server.
  const upstream = createSocket("udp4");
  const upstreamAsked: string[] = [];
  // Not execFileSync: the simulator answering kubectl runs in this process.
  const kubectl = async (...args: string[]) => (await promisify(execFile)("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, "-n", h.ns, ...args], { timeout: 20_000 })).stdout;

  beforeAll(async () => {
    upstream.on("message", (msg, from) => {
      const q = dnsPacket.decode(msg) as DecodedPacket;
      const question = q.questions![0]!;
      upstreamAsked.push(`${question.type} ${question.name}`);
      const known = question.name === "outside.example.test" && question.type === "A";
      upstream.send(dnsPacket.encode({
        type: "response", id: q.id, flags: dnsPacket.RECURSION_AVAILABLE | (question.name === "outside.example.test" ? 0 : 3), questions: q.questions,
        answers: known ? [{ type: "A", name: question.name, ttl: 60, data: "198.51.100.77" }] : [],
      }), from.port, from.address);
    });
    await new Promise<void>((ok) => upstream.bind(0, "127.0.0.1", () => ok()));
    h = await startHarness({ runtime: "docker", upstreamDns: [`127.0.0.1:${upstream.address().port}`] });
  });
  afterAll(async () => {
    await h?.sim.stop();
    upstream.close();
  });

  it("routes a Service's names in pods and its ClusterIP from the machine to its pod, and kubectl shows both", async () => {
    expect(h.sim.network).toMatchObject({ routed: true, clusterDomain: "cluster.local" });
    expect(h.sim.network.serviceRange).toMatch(/^10\.96\.\d+\.0\/24$/);
    expect(h.sim.dnsServer).toBe(h.sim.network.serviceRange.replace(/0\/24$/, "10"));
    const app = fresh("web");
    const web = fresh("web-a");
    const client = fresh("client");
    // The client starts with the server and asks until the Service answers (the Endpoints follow the server's start):
    // every form of the name, the headless one, a name outside the cluster, and one in it that does not exist.
    const urls = [`http://${app}.${h.ns}.svc:80/`, `http://${app}/`, `http://${app}.${h.ns}/`, `http://${app}.${h.ns}.svc.cluster.local/`];
    const script = [
      "const http = require('http'), dns = require('dns');",
      "const get = (u) => new Promise((ok) => http.get(u, { agent: false, timeout: 2000 }, (r) => { let b = ''; r.on('data', (d) => b += d); r.on('end', () => ok(b)); })",
      "  .on('timeout', function () { this.destroy(); }).on('error', (e) => ok('ERR ' + e.code)));",
      "const lookup = (n) => new Promise((ok) => dns.lookup(n, { all: true, family: 4 }, (e, a) => ok(e ? e.code : a.map((x) => x.address).sort())));",
      "const until = Date.now() + 25000;",
      "const patiently = async (f) => { for (;;) { const v = await f(); if (!/^(ERR|ENOTFOUND)/.test(String(v)) || Date.now() > until) return v; await new Promise((r) => setTimeout(r, 100)); } };",
      `(async () => { const out = {}; for (const u of ${JSON.stringify(urls)}) out[u] = await patiently(() => get(u));`,
      `out.headless = await patiently(() => lookup('${app}-hl')); out.outside = await lookup('outside.example.test'); out.missing = await lookup('missing.${h.ns}.svc.cluster.local');`,
      "console.log(JSON.stringify(out)); })();",
    ].join("\n");
    const svc = await createService(h, app, app);
    await createService(h, `${app}-hl`, app, { clusterIP: "None" });
    await h.core.createNamespacedPod({ namespace: h.ns, body: server(web, app) });
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(client, { containers: [{ name: "main", image: NODE, command: ["node", "-e", script] }] }) });
    const [podIP] = await endpointsWith(h, app, 1);
    const clusterIP = svc.spec!.clusterIP!;

    // From the machine: the ClusterIP (once the rules follow the Endpoints), and the names through the cluster DNS.
    expect(await waitFor("the ClusterIP to answer", async () => ((await fetchOnce(`http://${clusterIP}/`)) === web ? true : undefined), 15_000)).toBe(true);
    const resolver = new dns.Resolver();
    resolver.setServers([h.sim.dnsServer!]);
    expect(await resolver.resolve4(`${app}.${h.ns}.svc.cluster.local`)).toEqual([clusterIP]);
    expect(await resolver.resolve4(`${app}-hl.${h.ns}.svc.cluster.local`)).toEqual([podIP]);

    await podWhere(h, client, (p) => p.status?.phase === "Succeeded" || p.status?.phase === "Failed", "the client to end", 40_000);
    const seen = JSON.parse(await h.core.readNamespacedPodLog({ name: client, namespace: h.ns, container: "main" })) as Record<string, unknown>;
    expect(seen).toEqual({ ...Object.fromEntries(urls.map((u) => [u, web])), headless: [podIP], outside: ["198.51.100.77"], missing: "ENOTFOUND" });
    expect(upstreamAsked).toContain("A outside.example.test");

    expect(await kubectl("get", "svc", app)).toMatch(new RegExp(`^${app}\\s+ClusterIP\\s+${clusterIP.replace(/\./g, "\\.")}\\s+<none>\\s+80/TCP\\s`, "m"));
    expect(await kubectl("get", "svc", `${app}-hl`)).toMatch(new RegExp(`^${app}-hl\\s+ClusterIP\\s+None\\s`, "m"));
    expect(await kubectl("get", "endpoints", app)).toMatch(new RegExp(`^${app}\\s+${podIP!.replace(/\./g, "\\.")}:8080\\s`, "m"));
  });

  it("balances over every ready pod, drops a deleted one, and refuses what has no endpoint", async () => {
    const app = fresh("pair");
    const [a, b] = [fresh("pair-a"), fresh("pair-b")];
    for (const name of [a, b]) await h.core.createNamespacedPod({ namespace: h.ns, body: server(name, app) });
    const clusterIP = (await createService(h, app, app)).spec!.clusterIP!;
    await endpointsWith(h, app, 2);
    const answered = new Set<string>();
    await waitFor("both pods to answer the ClusterIP", async () => {
      answered.add(await fetchOnce(`http://${clusterIP}/`));
      return answered.has(a) && answered.has(b) ? true : undefined;
    }, 20_000);

    await h.core.deleteNamespacedPod({ name: a, namespace: h.ns, gracePeriodSeconds: 5 });
    await endpointsWith(h, app, 1);
    // Ten in a row from the pod left, once the rules follow: none reaches the one being deleted.
    await waitFor("only the pod left to answer", async () => {
      const bodies = await Promise.all(Array.from({ length: 10 }, () => fetchOnce(`http://${clusterIP}/`)));
      return bodies.every((x) => x === b) ? true : undefined;
    }, 15_000);

    await h.core.deleteNamespacedPod({ name: b, namespace: h.ns, gracePeriodSeconds: 0 });
    await endpointsWith(h, app, 0);
    expect(await waitFor("the ClusterIP refused", async () => ((await fetchOnce(`http://${clusterIP}/`)) === "ERR ECONNREFUSED" ? true : undefined), 15_000)).toBe(true);
    // An address of the range that no Service has is refused too.
    const unused = h.sim.network.serviceRange.replace(/0\/24$/, "254");
    expect(await fetchOnce(`http://${unused}/`)).toBe("ERR ECONNREFUSED");
  });

  it("lets a pod reach itself through its own Service (hairpin)", async () => {
    const app = fresh("self");
    const name = fresh("self");
    await createService(h, app, app);
    // The pod serves, then calls its Service until the Service answers (the Endpoints follow its start).
    const script = [
      SERVER, ";",
      "const call = () => require('http').get({ host: '" + app + "', port: 80, agent: false, timeout: 2000 }, (r) => { let b = ''; r.on('data', (d) => b += d);",
      "  r.on('end', () => { console.log('answered by ' + b); process.exit(0); }); }).on('timeout', function () { this.destroy(); }).on('error', () => setTimeout(call, 100));",
      "call();",
    ].join("\n");
    await h.core.createNamespacedPod({ namespace: h.ns, body: labelled(pod(name, {
      containers: [{ name: "main", image: NODE, command: ["node", "-e", script], ports: [{ name: "http", containerPort: 8080 }] }],
    }), app) });
    await podWhere(h, name, (p) => p.status?.phase === "Succeeded", "the pod to have reached itself", 30_000);
    expect(await h.core.readNamespacedPodLog({ name, namespace: h.ns, container: "main" })).toBe(`answered by ${name}\n`);
  });

  it("removes at start the iptables rules of a kube-sim killed with SIGKILL", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kube-sim-net-killed-"));
    const killed = await startKubeSimProcess({ kubeconfigPath: join(dir, "a"), runtime: "docker", deadlineMs: 30_000 });
    try {
      const rules = () => execFileSync("iptables-save", { encoding: "utf8" });
      const mark = `pid ${killed.pid}"`;
      const created = await fetch(`${killed.url}/api/v1/namespaces/default/services`, { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ metadata: { name: "left" }, spec: { ports: [{ port: 80 }] } }) });
      expect(created.status).toBe(201);
      expect(killed.dnsServer).toMatch(/^10\.96\.\d+\.10$/);
      const dnsRule = `-d ${killed.dnsServer}/32`;
      await waitFor("the killed kube-sim's rules", () => rules().includes(mark) && rules().includes(dnsRule), 15_000);
      process.kill(killed.pid, "SIGKILL");
      await killed.kill();
      expect(rules()).toContain(mark);
      const next = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(dir, "b"), runtime: "docker" });
      const own = `"kube-sim slot ${next.network.serviceRange.split(".")[2]} pid ${process.pid}"`;
      try {
        // Gone once the next kube-sim has started. Which one removed them is not this test's to
        // say: suites running beside it start kube-sims too, and the first to start does it.
        expect(rules()).not.toContain(mark);
        // The range is free again for whoever takes it (the next one, or a kube-sim of a suite
        // beside it): a DNS rule of that address left now is the taker's, whose slot it is.
        const slot = killed.dnsServer!.split(".")[2];
        const holders = [...rules().matchAll(new RegExp(`kube-sim slot ${slot} pid (\\d+)"`, "g"))].map((m) => Number(m[1]));
        if (rules().includes(dnsRule)) expect(holders.filter((pid) => pid !== killed.pid)).not.toEqual([]);
        expect(holders).not.toContain(killed.pid);
        expect(rules()).toContain(own);
      } finally { await next.stop(); }
      // And a kube-sim that stops takes its own rules away.
      expect(rules()).not.toContain(own);
    } finally { await killed.kill(); }
  });
});

// The image ephemera/router as a cluster runs it in a pod: containers sharing one network
// namespace (a holder container standing for the pod's), the init container
// ephemera-router-init as root with NET_ADMIN installing the REDIRECT rules, the router as
// user 10001 with no capability on a read-only root filesystem, and two apps. Requests from
// outside the pod (this machine, over Docker's bridge) to the app's port reach the router,
// which follows a Routes API server on this machine: the keyed one goes to the fork, the
// rest to the app. When Docker cannot run here, one line says why.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { promisify } from "node:util";
import { waitFor } from "@ephemera/kit";
import { routingRule, TestRoutesServer } from "../../services/router/src/routes-server.testkit.js";
import { describeWithDocker, withContainerLogs } from "../support/docker.js";
import { bridgeGateway } from "../support/kube.js";
import { freePort } from "../support/stack.js";

const ROOT = join(__dirname, "..", "..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const IMAGE = `ephemera/router:${VERSION}`;
const ORDERS = { kind: "Deployment", namespace: "shop", name: "orders" };
const KEY = "k3fd0c2a91b7";

const run = promisify(execFile);
const docker = async (args: string[]) => (await run("docker", args, { maxBuffer: 16 << 20 })).stdout.trim();

/** A one-line HTTP app answering its name, as user 10001, in the pod's network namespace. */
const app = (name: string, port: number) =>
  `require("http").createServer((q, s) => s.end(${JSON.stringify(name)})).listen(${port})`;

describeWithDocker("the image ephemera/router in a pod's network namespace", () => {
  const pod = `router-img-${process.pid}`;
  const started: string[] = [];
  let routes: TestRoutesServer;
  let podIp: string;

  // A failure says what the containers said last.
  const withLogs = (f: () => Promise<void>) => withContainerLogs(started, f);
  /** A container of the pod (sharing the holder's network namespace). */
  const inPod = async (name: string, args: string[]) => {
    started.push(`${pod}-${name}`);
    return docker(["run", "-d", "--name", `${pod}-${name}`, "--network", `container:${pod}`, ...args]);
  };
  const nat = () => docker(["run", "--rm", "--network", `container:${pod}`, "--cap-add", "NET_ADMIN", "--user", "0", IMAGE, "iptables", "-t", "nat", "-S"]);
  const init = (ports: string) => run("docker", ["run", "--rm", "--network", `container:${pod}`, "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
    "--cap-drop", "ALL", "--user", "0", "-e", `EPHEMERA_ROUTER_PORTS=${ports}`, IMAGE, "ephemera-router-init"]);

  beforeAll(async () => {
    await run("bash", [join(ROOT, "scripts/images.sh"), "--no-build", "router"], { cwd: ROOT, timeout: 600_000, maxBuffer: 16 << 20 });
    routes = await TestRoutesServer.start(await freePort(), [routingRule(ORDERS, KEY, { 8080: { host: "127.0.0.1", port: 8081 } })], bridgeGateway());
    // The pod's network namespace, held by a container that only sleeps (a pod's pause container).
    started.push(pod);
    await docker(["run", "-d", "--name", pod, "--user", "10001", IMAGE, "sleep", "infinity"]);
    podIp = await docker(["inspect", "-f", "{{ .NetworkSettings.IPAddress }}", pod]);
  }, 660_000);

  afterAll(async () => {
    if (started.length) await docker(["rm", "-f", ...started]);
    routes?.stop();
  }, 60_000);

  it("ephemera-router-init installs the REDIRECT rules in a chain of its own, the same ones when run again", () => withLogs(async () => {
    const refused = await init("8080:nope").then(() => "ran", (e: { code: number; stderr: string }) => `${e.code} ${e.stderr.trim()}`);
    expect(refused).toBe('2 ephemera-router-init: EPHEMERA_ROUTER_PORTS: "8080:nope" is not <appPort>:<listenPort> with ports from 1 to 65535');
    const { stderr } = await init("8080:15000, 9090:15001");
    expect(stderr.trim()).toBe("ephemera-router-init: inbound TCP redirected: 8080 → 15000 9090 → 15001");
    const rules = [
      "-N EPHEMERA_ROUTER",
      "-A PREROUTING -p tcp -j EPHEMERA_ROUTER",
      "-A EPHEMERA_ROUTER -p tcp -m tcp --dport 8080 -j REDIRECT --to-ports 15000",
      "-A EPHEMERA_ROUTER -p tcp -m tcp --dport 9090 -j REDIRECT --to-ports 15001",
    ];
    const ours = (text: string) => text.split("\n").filter((l) => l.includes("EPHEMERA_ROUTER"));
    expect(ours(await nat())).toEqual(rules);
    await init("8080:15000,9090:15001");
    expect(ours(await nat())).toEqual(rules);
  }), 120_000);

  it("a request from outside the pod to the app's port reaches the router, which routes it by its key", () => withLogs(async () => {
    await init("8080:15000");
    await inPod("baseline", ["--user", "10001", IMAGE, "node", "-e", app("baseline", 8080)]);
    await inPod("fork", ["--user", "10001", IMAGE, "node", "-e", app("fork", 8081)]);
    await inPod("router", [
      "--read-only", "--cap-drop", "ALL",
      "-e", "EPHEMERA_ROUTER_WORKLOAD=Deployment/shop/orders", "-e", "EPHEMERA_ROUTER_PORTS=8080:15000",
      "-e", `EPHEMERA_ROUTES=${bridgeGateway()}:${routes.port}`, IMAGE,
    ]);
    const inspected = JSON.parse(await docker(["inspect", `${pod}-router`])) as [{ Config: { User: string; Cmd: string[] } }];
    expect([inspected[0].Config.User, inspected[0].Config.Cmd]).toEqual(["10001:10001", ["node", "/router/router.cjs"]]);

    await waitFor(() => get(podIp, 15020, "/healthz").then((r) => r.status === 200, () => false),
      { timeoutMs: 30_000, intervalMs: 200, what: "the router ready (GET /healthz 200)" });
    expect(await get(podIp, 8080, "/", { baggage: `sd-routing-key=${KEY}` })).toEqual({ status: 200, body: "fork" });
    expect(await get(podIp, 8080, "/")).toEqual({ status: 200, body: "baseline" });
    expect(await get(podIp, 8080, "/", { baggage: "sd-routing-key=unknownkey01" })).toEqual({ status: 200, body: "baseline" });
    // Inside the pod, to the app's port directly (OUTPUT, not PREROUTING): the app itself, not redirected.
    const inside = await docker(["run", "--rm", "--network", `container:${pod}`, "--user", "10001", IMAGE, "node", "-e",
      `require("http").get({ port: 8080, headers: { baggage: "sd-routing-key=${KEY}" } }, (r) => r.pipe(process.stdout))`]);
    expect(inside).toBe("baseline");
  }), 120_000);
});

function get(host: string, port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, headers, agent: false, timeout: 5_000 }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer from ${host}:${port} in 5 s`)));
    req.on("error", reject);
    req.end();
  });
}

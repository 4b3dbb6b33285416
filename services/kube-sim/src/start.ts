// startKubeSim: the simulator in this process — store, API server, kubelet — on a port
// of its own, with its kubeconfig written. The composition root main.ts and in-process
// tests both start it through here.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Admission } from "./admission/admit.js";
import { Crud } from "./api/crud.js";
import { handler } from "./api/server.js";
import { randomBytes } from "node:crypto";
import { dockerRuntime, dockerUnavailable, removeLeftovers } from "./kubelet/docker-runtime.js";
import { ClusterIPs } from "./network/cluster-ips.js";
import { startEndpointsController } from "./network/endpoints-controller.js";
import { podDnsArgs } from "./network/pod-dns.js";
import { routedNetwork, unroutedNetwork, type ServiceNetwork } from "./network/service-network.js";
import { defaultImageMap, type ImageEntry } from "./kubelet/images.js";
import { Kubelet } from "./kubelet/kubelet.js";
import { confinementConfig, type Confinement } from "./kubelet/launch.js";
import { processRuntime } from "./kubelet/process-runtime.js";
import type { ContainerRuntime } from "./kubelet/runtime.js";
import { startWorkloadController } from "./controllers/workloads.js";
import { startDeploymentPods } from "./controllers/deployment-pods.js";
import { writeKubeconfig } from "./kubeconfig.js";
import { findRepoRoot } from "./repo.js";
import { typeOf } from "./resources.js";
import { Store, type Obj } from "./store.js";
import { control } from "./sim/control.js";
import { Faults } from "./sim/faults.js";
import { CallCounter, type StatsSnapshot } from "./sim/stats.js";

export interface KubeSimOptions {
  /** host:port; port 0 picks a free one. Default 127.0.0.1:7443. */
  listen?: string;
  /** Where the kubeconfig is written. Default `.ephemera/kube-sim.kubeconfig` under the cwd. */
  kubeconfigPath?: string;
  /** Directory for emptyDirs, private /tmp dirs and logs; default a temp dir removed on stop. */
  dataDir?: string;
  /** How many changes are kept for watches to resume from (default 1000). */
  watchHistory?: number;
  /** Extra image map entries, before the default `ephemera/agent` ones. */
  images?: ImageEntry[];
  /** How containers run: Docker containers, or host processes; default docker when Docker answers. */
  runtime?: RuntimeName;
  /** The ephemera checkout, for the default image map; default found above the cwd. */
  repoRoot?: string;
  /** How often a watch with allowWatchBookmarks gets a BOOKMARK (default 1000 ms). */
  bookmarkEveryMs?: number;
  /** How the process runtime confines containers; default the process driver's settings from the environment (launch.ts). */
  confinement?: Confinement;
  /** Resolvers the cluster DNS forwards other names to; default the machine's. */
  upstreamDns?: string[];
  /** Where warnings go (a webhook failing open); default stderr. */
  warn?: (line: string) => void;
  /** Run each Deployment's pods (EPHEMERA_KUBE_SIM_WORKLOAD_PODS); default off: availability is reported without pods. */
  workloadPods?: boolean;
}

export type RuntimeName = "docker" | "process";
export const RUNTIMES: readonly RuntimeName[] = ["docker", "process"];

export interface NetworkInfo {
  /** Where ClusterIPs come from: this kube-sim's /24 of 10.96.0.0/16 when routed. */
  serviceRange: string;
  routed: boolean;
  dnsServer: string | undefined;
  clusterDomain: string;
  /** One line: how Services are routed, or why not. */
  summary: string;
}

export class RuntimeUnavailableError extends Error {
  override readonly name = "RuntimeUnavailableError";
}

export interface KubeSim {
  url: string;
  /** The container runtime, and why it was chosen (one line). */
  runtime: { name: RuntimeName; why: string };
  kubeconfigPath: string;
  dataDir: string;
  /** Services on the wire: routed under the docker runtime where iptables can be used. */
  network: NetworkInfo;
  /**
   * The cluster DNS server (kube-dns's ClusterIP, port 53), for host processes too:
   * `new dns.Resolver().setServers([sim.dnsServer])`, then ask for `<svc>.<ns>.svc.cluster.local`
   * (a resolver has no search domains); undefined when Services are not routed.
   */
  dnsServer: string | undefined;
  stats(): StatsSnapshot;
  /** Kills every container process, removes its iptables rules, closes the server, removes a temp data dir. */
  stop(): Promise<void>;
}

export async function startKubeSim(options: KubeSimOptions = {}): Promise<KubeSim> {
  const repoRoot = options.repoRoot ?? findRepoRoot();
  const [host, portText] = splitListen(options.listen ?? "127.0.0.1:7443");
  const ownData = !options.dataDir;
  const dataDir = options.dataDir ? resolve(options.dataDir) : mkdtempSync(join(tmpdir(), "kube-sim-"));
  mkdirSync(dataDir, { recursive: true });
  const images = [...(options.images ?? []), ...defaultImageMap(repoRoot)];
  const confined = () => processRuntime(confinementFor(options.confinement, repoRoot));
  const { runtime, why, network } = await chooseRuntime(options, dataDir, images, confined);
  const store = new Store(options.watchHistory ?? 1000);
  const kubelet = new Kubelet(store, dataDir, images, runtime);
  const crud = new Crud(store, kubelet, new ClusterIPs(network.serviceRange, () => store.list(typeOf("services"))));
  const stopWorkloads = startWorkloadController(store);
  const stopEndpoints = startEndpointsController(store, crud);
  for (const ns of ["default", "kube-system", "kube-public"]) crud.create(typeOf("namespaces"), undefined, { metadata: { name: ns } } as unknown as Obj);
  const faults = new Faults();
  const calls = new CallCounter();
  const stats = (): StatsSnapshot => ({ calls: calls.snapshot(), containersStarted: kubelet.containersStarted, podsRunning: kubelet.podsRunning() });
  let url = "";
  const warn = options.warn ?? ((line: string) => console.warn(`kube-sim: ${line}`));
  const admission = new Admission(store, warn);
  const stopPods = options.workloadPods ? startDeploymentPods(store, crud, admission, warn) : () => undefined;
  const server = createServer(handler({
    store, crud, admission, faults, calls, bookmarkEveryMs: options.bookmarkEveryMs ?? 1000,
    logFile: (pod, c) => kubelet.logFile(pod, c),
    control: control({ store, faults, stats, resetStats: () => calls.reset(), network: () => networkInfo(network) }),
    address: () => url.replace(/^http:\/\//, ""),
  }));
  server.keepAliveTimeout = 60_000;
  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= (async () => {
    stopWorkloads();
    stopPods();
    stopEndpoints();
    await kubelet.stop();
    await network.stop();
    server.closeAllConnections();
    await new Promise<void>((ok) => server.close(() => ok()));
    if (ownData) rmSync(dataDir, { recursive: true, force: true });
  })());
  try {
    await new Promise<void>((ok, fail) => {
      server.once("error", fail);
      server.listen(Number(portText), host, () => ok());
    });
    const port = (server.address() as AddressInfo).port;
    url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
    await network.start(store, crud);
  } catch (err) {
    // What was claimed for it (a slot of the service range, iptables rules) goes too.
    await stop();
    throw err;
  }
  const kubeconfigPath = resolve(options.kubeconfigPath ?? ".ephemera/kube-sim.kubeconfig");
  writeKubeconfig(kubeconfigPath, url);
  return {
    url, kubeconfigPath, dataDir, stats, runtime: { name: runtime.name, why },
    network: networkInfo(network), dnsServer: network.clusterDns?.server,
    stop,
  };
}

const networkInfo = (network: ServiceNetwork): NetworkInfo => ({
  serviceRange: network.serviceRange.text, routed: !!network.clusterDns, dnsServer: network.clusterDns?.server,
  clusterDomain: network.clusterDns?.domain ?? "cluster.local", summary: network.summary,
});

interface Chosen { runtime: ContainerRuntime; why: string; network: ServiceNetwork }

/** The runtime asked for, or docker when Docker answers and process otherwise; docker asked for and not answering is an error. */
async function chooseRuntime(options: KubeSimOptions, dataDir: string, images: ImageEntry[], processRuntime: () => ContainerRuntime): Promise<Chosen> {
  const onHostNetwork = unroutedNetwork("the process runtime runs pods on the host's network, with no pod IPs to route to");
  if (options.runtime === "process") return { runtime: processRuntime(), why: "asked for", network: onHostNetwork };
  const unavailable = await dockerUnavailable();
  if (unavailable) {
    if (options.runtime === "docker") throw new RuntimeUnavailableError(`the docker runtime was asked for, but Docker does not answer (${unavailable})`);
    return { runtime: processRuntime(), why: `Docker does not answer (${unavailable})`, network: onHostNetwork };
  }
  // Containers of a kube-sim that was killed (this data dir's, or of a process now gone).
  const removed = await removeLeftovers(dataDir);
  const simId = randomBytes(6).toString("hex");
  const network = await routedNetwork(options.upstreamDns ? { upstreamDns: options.upstreamDns } : {})
    .catch((err: Error) => unroutedNetwork(err.message));
  const clusterDns = network.clusterDns;
  return {
    runtime: dockerRuntime({ simId, dataDir, images, podDns: (pod) => podDnsArgs(pod.spec, pod.namespace, clusterDns) }),
    why: `Docker answers${removed ? `; ${removed} leftover container(s) removed` : ""}`,
    network,
  };
}

/** The process runtime's confinement: as given, or the process driver's settings; its launcher must be built. */
function confinementFor(given: Confinement | undefined, repoRoot: string): Confinement {
  const confinement = given ?? confinementConfig(process.env, process.getuid?.(), repoRoot);
  if (!existsSync(confinement.launcher)) throw new Error(`no ephemera-launch at ${confinement.launcher}: \`pnpm build\` makes it (scripts/build-launcher.sh)`);
  return confinement;
}

function splitListen(listen: string): [string, string] {
  const at = listen.lastIndexOf(":");
  if (at < 0) return ["127.0.0.1", listen];
  return [listen.slice(0, at).replace(/^\[|\]$/g, "") || "127.0.0.1", listen.slice(at + 1)];
}

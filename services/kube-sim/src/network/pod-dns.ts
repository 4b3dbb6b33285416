// A pod's resolv.conf as the kubelet writes it for its dnsPolicy and dnsConfig, as the
// `docker run` options of its pause container (the pod's other containers share it).
// ClusterFirst (the default): the cluster DNS, the namespace's search domains, ndots:5;
// Default: the machine's resolvers (Docker's own copy of them); None: dnsConfig only.
// Without cluster DNS, ClusterFirst falls back to Default, as the kubelet's does. One
// difference: dnsConfig's nameservers under Default replace the machine's instead of
// following them (Docker takes `--dns` instead of its copy). Pure.

type Rec = Record<string, unknown>;

export interface ClusterDns {
  /** The address pods send queries to (kube-dns's ClusterIP). */
  server: string;
  domain: string;
}

/** At most three nameservers reach resolv.conf, as glibc reads no more. */
const MAX_NAMESERVERS = 3;

export function podDnsArgs(spec: Rec, namespace: string, cluster: ClusterDns | undefined): string[] {
  const policy = String(spec["dnsPolicy"] ?? "ClusterFirst");
  const config = (spec["dnsConfig"] ?? {}) as Rec;
  const extraServers = (config["nameservers"] ?? []) as string[];
  const extraSearches = (config["searches"] ?? []) as string[];
  const extraOptions = (config["options"] ?? []) as Array<{ name: string; value?: string }>;
  const clusterFirst = (policy === "ClusterFirst" || policy === "ClusterFirstWithHostNet") && cluster;
  let servers: string[] = [];
  let searches: string[] = [];
  let options: Array<{ name: string; value?: string }> = [];
  if (clusterFirst) {
    servers = [cluster.server];
    searches = [`${namespace}.svc.${cluster.domain}`, `svc.${cluster.domain}`, cluster.domain];
    options = [{ name: "ndots", value: "5" }];
  }
  servers = [...servers, ...extraServers].slice(0, MAX_NAMESERVERS);
  searches = [...new Set([...searches, ...extraSearches])];
  for (const o of extraOptions) options = [...options.filter((x) => x.name !== o.name), o];
  return [
    ...servers.flatMap((s) => ["--dns", s]),
    ...searches.flatMap((s) => ["--dns-search", s]),
    ...options.flatMap((o) => ["--dns-opt", o.value !== undefined ? `${o.name}:${o.value}` : o.name]),
  ];
}

// Names as a pod's resolver reads them, for processes outside the cluster that reach its
// Services (the preview gateway, the tunnel service): the cluster's DNS servers are asked,
// and a Service's short forms become `….svc.cluster.local`, a resolver here having no search domains.
import { promises as dns, lookup as systemLookup, type LookupAddress, type LookupOptions } from "node:dns";

/** `<svc>.<ns>.svc` and `<svc>.<ns>` as `<svc>.<ns>.svc.cluster.local`; any other name as it is. */
export const clusterFqdn = (name: string): string =>
  name.endsWith(".svc") ? `${name}.cluster.local` : /^[^.]+\.[^.]+$/.test(name) ? `${name}.svc.cluster.local` : name;

export type LookupFunction = (
  hostname: string, options: LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
) => void;

/**
 * A `lookup` (for an http Agent or net.connect) that asks the given name servers (IPv4) for
 * the cluster's form of the name, then the name as it is; a name they do not know (an IP,
 * localhost) goes to the machine's resolver.
 */
export function clusterLookup(servers: string[]): LookupFunction {
  const resolver = new dns.Resolver();
  resolver.setServers(servers);
  return (hostname, options, callback) => {
    resolver.resolve4(clusterFqdn(hostname)).catch(() => resolver.resolve4(hostname)).then(
      (addresses) => options.all ? callback(null, addresses.map((address) => ({ address, family: 4 }))) : callback(null, addresses[0]!, 4),
      () => systemLookup(hostname, options, callback as never),
    );
  };
}

// Which endpoint a request to the preview gateway is for, by its Host: an endpoint URL's host
// (`<endpoint>--<routing key>.<preview domain>`) is that sandbox's endpoint, reached with its
// routing key; a baseline URL's host is the endpoint's target without a key. The hosts are
// the ones the sandbox service minted for each sandbox's endpoints (its `url` and
// `baselineUrl`), so the gateway and `eph sandbox get` always agree.
import type { SandboxRecord } from "../sandbox/state.js";

export type GatewayRoute =
  | { kind: "endpoint"; target: string; routingKey: string; sandbox: string; endpoint: string }
  | { kind: "baseline"; target: string }
  | { kind: "unknown"; reason: string };

const hostOf = (url: string): string | undefined => {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
};

/** Pure: the Host header without its port, lowercased. */
export function requestHost(header: string | undefined): string {
  const host = (header ?? "").trim().toLowerCase();
  return host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.replace(/:\d+$/, "");
}

/** Pure: where a request for `host` goes, among the sandboxes that are not deleted. */
export function routeFor(host: string, domain: string, sandboxes: Iterable<Pick<SandboxRecord, "status" | "name" | "routingKey" | "endpoints">>): GatewayRoute {
  const suffix = `.${domain.toLowerCase()}`;
  if (!host) return { kind: "unknown", reason: "the request has no Host header" };
  if (!host.endsWith(suffix)) return { kind: "unknown", reason: `host ${host} is not under the preview domain ${domain}` };
  let baseline: string | undefined;
  for (const sb of sandboxes) {
    if (sb.status === "deleted") continue;
    for (const e of sb.endpoints) {
      if (hostOf(e.url) === host) return { kind: "endpoint", target: e.target, routingKey: sb.routingKey, sandbox: sb.name, endpoint: e.name };
      if (baseline === undefined && hostOf(e.baselineUrl) === host) baseline = e.target;
    }
  }
  if (baseline !== undefined) return { kind: "baseline", target: baseline };
  const label = host.slice(0, -suffix.length);
  const sep = label.lastIndexOf("--");
  return {
    kind: "unknown",
    reason: sep > 0
      ? `no endpoint ${label.slice(0, sep)} of a sandbox with routing key ${label.slice(sep + 2)} (deleted, or never made)`
      : `no endpoint has the baseline URL host ${host}`,
  };
}

/** Pure: an endpoint's target as a URL the gateway can forward to (`http://` when it names no scheme). */
export function targetUrl(target: string): URL {
  return new URL(target.includes("://") ? target : `http://${target}`);
}

// Endpoint URLs, minted the same way for sandboxes and route groups: the gateway finds a
// request's endpoint by the URL's host (gateway/hosts.ts).
import type * as pb from "@ephemera/proto";
import { shortHash } from "@ephemera/kit";

/** Longest DNS label: the URL's first label is `<endpoint>--<routing key>`. */
const DNS_LABEL_MAX = 63;

/**
 * `https://<endpoint>--<routing key>.<domain>`, and the target's baseline URL beside it. An
 * endpoint name too long for one DNS label with the key is cut and followed by a short hash of
 * the whole name, so that the host stays a valid name and two long names stay apart; a name
 * that fits is never changed (URLs already handed out keep working).
 */
export function endpointUrls(endpoints: pb.Endpoint[], routingKey: string, domain: string): pb.EndpointUrl[] {
  return endpoints.map((e) => ({
    name: e.name, target: e.target, url: `https://${endpointLabel(e.name, routingKey)}.${domain}`, baselineUrl: baselineUrl(e.target, domain),
  }));
}

function endpointLabel(name: string, routingKey: string): string {
  const room = DNS_LABEL_MAX - 2 - routingKey.length;
  if (name.length <= room) return `${name}--${routingKey}`;
  const hash = shortHash(name);
  return `${name.slice(0, room - 1 - hash.length).replace(/-+$/, "")}-${hash}--${routingKey}`;
}

/**
 * The preview URL of an endpoint's target without a routing key (what the baseline
 * answers): `http://orders.shop.svc:8080` → `https://orders-shop-8080.<domain>`, the same
 * for every sandbox routing to that target.
 */
export function baselineUrl(target: string, domain: string): string {
  let host = target;
  let port = "";
  try {
    const u = new URL(target.includes("://") ? target : `http://${target}`);
    host = u.hostname;
    port = u.port;
  } catch {
    // Not a URL: named as written.
  }
  const name = host.replace(/\.svc(\.cluster\.local)?$/, "").replace(/[^a-z0-9]+/gi, "-").toLowerCase();
  return `https://${[name, port].filter(Boolean).join("-")}.${domain}`;
}

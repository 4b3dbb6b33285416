// The routing-key headers, as Signadot's context propagation carries them: the gateway sets
// all four on a request for a sandbox's endpoint (any one is enough for a router), and
// removes them from a request for a baseline URL, so a client cannot pick a sandbox there.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

export const ROUTING_KEY_MEMBER = "sd-routing-key";
export const OT_BAGGAGE_HEADER = "ot-baggage-sd-routing-key";
export const UBERCTX_HEADER = "uberctx-sd-routing-key";

/** A comma-separated list header without its `sd-routing-key` member. */
function withoutMember(value: string | string[] | undefined): string[] {
  const text = Array.isArray(value) ? value.join(",") : value ?? "";
  return text.split(",").map((m) => m.trim()).filter((m) => m && m.split("=")[0]!.trim().toLowerCase() !== ROUTING_KEY_MEMBER);
}

/** Pure: the request's headers with the routing key set (`key`), or removed (undefined). */
export function withRoutingKey(headers: IncomingHttpHeaders, key: string | undefined): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ...headers };
  delete out[OT_BAGGAGE_HEADER];
  delete out[UBERCTX_HEADER];
  const baggage = withoutMember(headers.baggage);
  const tracestate = withoutMember(headers.tracestate);
  if (key !== undefined) {
    baggage.push(`${ROUTING_KEY_MEMBER}=${key}`);
    // tracestate's newest member comes first.
    tracestate.unshift(`${ROUTING_KEY_MEMBER}=${key}`);
    out[OT_BAGGAGE_HEADER] = key;
    out[UBERCTX_HEADER] = key;
  }
  if (baggage.length) out.baggage = baggage.join(","); else delete out.baggage;
  if (tracestate.length) out.tracestate = tracestate.join(","); else delete out.tracestate;
  return out;
}

// The routing key a request carries, as Signadot's context propagation puts it in headers
// (pure). Any one of four headers, the first that holds a key winning in this order:
//   baggage: sd-routing-key=<key>          (W3C baggage: a list, other members allowed)
//   ot-baggage-sd-routing-key: <key>       (OpenTracing)
//   uberctx-sd-routing-key: <key>          (Jaeger)
//   tracestate: sd-routing-key=<key>       (W3C trace context: a list, other members allowed)

/** A header's value as Node gives it: HTTP/1 joins repeated headers, HTTP/2 may give a list. */
export type HeaderValue = string | string[] | undefined;
export type Headers = Readonly<Record<string, HeaderValue>>;

/** The member of baggage and tracestate lists that holds the key. */
export const ROUTING_KEY_MEMBER = "sd-routing-key";

/** The headers read, in the order they are tried. */
export const ROUTING_KEY_HEADERS = ["baggage", "ot-baggage-sd-routing-key", "uberctx-sd-routing-key", "tracestate"] as const;

/**
 * Routing keys are lowercase letters and digits (ephemera's are 12 of them). A value that is
 * not one cannot name a rule, so it is passed over and the next header is tried.
 */
const ROUTING_KEY = /^[a-z0-9]{1,63}$/;

/** Pure: the routing key of a request with these (lowercase-named) headers, or undefined. */
export function routingKeyOf(headers: Headers): string | undefined {
  return fromList(headers["baggage"])
    ?? plain(headers["ot-baggage-sd-routing-key"])
    ?? plain(headers["uberctx-sd-routing-key"])
    ?? fromList(headers["tracestate"]);
}

const joined = (value: HeaderValue) => (Array.isArray(value) ? value.join(",") : value);

function plain(value: HeaderValue): string | undefined {
  const v = joined(value);
  return v === undefined ? undefined : valid(decode(v.split(",")[0]!.trim()));
}

/**
 * `key=value` members separated by commas, with optional whitespace around each; baggage
 * members may carry `;property` after the value, and baggage values are percent-encoded.
 */
function fromList(value: HeaderValue): string | undefined {
  const v = joined(value);
  if (v === undefined) return undefined;
  for (const member of v.split(",")) {
    const eq = member.indexOf("=");
    if (eq < 0 || member.slice(0, eq).trim() !== ROUTING_KEY_MEMBER) continue;
    const key = valid(decode(member.slice(eq + 1).split(";")[0]!.trim()));
    if (key !== undefined) return key;
  }
  return undefined;
}

function decode(value: string): string {
  if (!value.includes("%")) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

const valid = (key: string) => (ROUTING_KEY.test(key) ? key : undefined);

// What a connection speaks, from the first bytes its client sends (pure): the HTTP/2
// connection preface (h2c, gRPC), an HTTP/1.x request line, or anything else (TCP, TLS
// included: the router does not terminate it, so it goes to the app as it is).

export type Protocol = "h2c" | "http1" | "tcp";

export const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** A request line longer than this is not waited for: it is HTTP/1 if it looks like one so far. */
export const MAX_REQUEST_LINE = 8192;

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const REQUEST_LINE = new RegExp(`^${TOKEN} [\\x21-\\x7e]+ HTTP/1\\.[01]$`);
/** What a request line may look like before its CRLF has arrived: the method, the target, a start of the version. */
const REQUEST_LINE_START = new RegExp(`^${TOKEN}( [\\x21-\\x7e]*( (H(T(T(P(/(1(\\.([01]\\r?)?)?)?)?)?)?)?)?)?)?$`);

/** Pure: the protocol of a connection whose client sent `bytes` first, or undefined while they cannot tell yet. */
export function sniff(bytes: Buffer): Protocol | undefined {
  if (bytes.length === 0) return undefined;
  const n = Math.min(bytes.length, H2_PREFACE.length);
  if (bytes.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) return bytes.length >= H2_PREFACE.length ? "h2c" : undefined;
  const end = bytes.indexOf("\r\n");
  if (end >= 0) return REQUEST_LINE.test(bytes.subarray(0, end).toString("latin1")) ? "http1" : "tcp";
  const start = bytes.subarray(0, MAX_REQUEST_LINE).toString("latin1");
  if (!REQUEST_LINE_START.test(start)) return "tcp";
  return bytes.length >= MAX_REQUEST_LINE ? "http1" : undefined;
}

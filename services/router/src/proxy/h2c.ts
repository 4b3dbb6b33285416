// HTTP/2 without TLS (h2c, prior knowledge: how gRPC talks in a cluster) on a listener: each
// stream routed on its own by its routing key, to an HTTP/2 session with its destination.
// Headers, data and trailers (gRPC's status) pass as they are; a reset on either side
// resets the other.
import { constants, createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { Logger } from "@ephemera/kit";
import type { Destination } from "../rules/table.js";
import { addressOf, type Upstreams } from "./upstreams.js";

const { NGHTTP2_FLAG_END_STREAM, NGHTTP2_NO_ERROR, NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR } = constants;

export type H2Route = (headers: IncomingHttpHeaders) => Destination;

export function h2cServer(route: H2Route, upstreams: Upstreams, logger: Logger): Http2Server {
  const server = createServer();
  server.on("stream", (stream, headers, flags) => forward(stream, headers, flags, route(headers), upstreams, logger));
  server.on("sessionError", (err) => logger.debug({ err: err.message }, "HTTP/2 client session failed"));
  return server;
}

function forward(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, to: Destination, upstreams: Upstreams, logger: Logger): void {
  const endStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
  const upstream = upstreams.session(to).request(headers, { endStream });
  if (endStream) stream.resume();
  else stream.pipe(upstream);

  let trailers: IncomingHttpHeaders | undefined;
  const gone = () => stream.destroyed || stream.closed;
  upstream.on("headers", (informational) => {
    if (!gone() && !stream.headersSent) stream.additionalHeaders(informational);
  });
  upstream.on("response", (response, responseFlags) => {
    if (gone()) {
      upstream.close(NGHTTP2_CANCEL);
      return;
    }
    const ends = (responseFlags & NGHTTP2_FLAG_END_STREAM) !== 0;
    // A gRPC error without a body ends in its headers ("trailers-only"); anything else may end in trailers.
    stream.respond(response, ends ? { endStream: true } : { waitForTrailers: true });
    if (ends) upstream.resume();
    else upstream.pipe(stream);
  });
  upstream.on("trailers", (received) => {
    trailers = received;
  });
  // Sent empty (an empty DATA frame ending the stream) when the response had none.
  stream.on("wantTrailers", () => stream.sendTrailers(trailers ?? {}));

  let failed = false;
  upstream.on("error", (err) => {
    failed = true;
    logger.warn({ upstream: addressOf(to), err: err.message }, "stream not proxied");
    if (gone()) return;
    if (stream.headersSent) {
      stream.close(NGHTTP2_INTERNAL_ERROR);
      return;
    }
    stream.respond({ ":status": 502, "content-type": "text/plain; charset=utf-8" });
    stream.end(`ephemera-router: cannot reach ${addressOf(to)}: ${err.message}\n`);
  });
  upstream.on("close", () => {
    if (!failed && !stream.closed && upstream.rstCode !== undefined && upstream.rstCode !== NGHTTP2_NO_ERROR) stream.close(upstream.rstCode);
  });
  stream.on("close", () => {
    if (!upstream.closed && stream.rstCode !== undefined && stream.rstCode !== NGHTTP2_NO_ERROR) upstream.close(NGHTTP2_CANCEL);
  });
  stream.on("error", () => {
    if (!upstream.closed) upstream.close(NGHTTP2_CANCEL);
  });
}

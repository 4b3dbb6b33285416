// A connection that is not HTTP goes to the app as it is: bytes both ways, each side's end
// passed on (half-close), and either side's failure closing both.
import { connect, type Socket } from "node:net";
import { pipeline } from "node:stream";
import type { Destination } from "../rules/table.js";

/** `first`: what the client sent while the router sniffed; `ended`: the client had already finished sending. */
export function pipeTcp(client: Socket, first: Buffer, ended: boolean, to: Destination): void {
  const upstream = connect({ host: to.host, port: to.port, allowHalfOpen: true, noDelay: true });
  const done = (err?: Error | null) => {
    if (err) {
      client.destroy();
      upstream.destroy();
    }
  };
  if (ended) upstream.end(first);
  else {
    if (first.length) upstream.write(first);
    pipeline(client, upstream, done);
  }
  pipeline(upstream, client, done);
}

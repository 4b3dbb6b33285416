// The router's connections to where it sends requests (the local app, fork Services): one
// keep-alive pool for HTTP/1.1 and one HTTP/2 session per destination, shared by every
// listener, so a request reuses a connection instead of opening one.
import { Agent } from "node:http";
import { connect, type ClientHttp2Session } from "node:http2";
import { isIPv6 } from "node:net";
import type { Logger } from "@ephemera/kit";
import type { Destination } from "../rules/table.js";

export const addressOf = (d: Destination) => `${isIPv6(d.host) ? `[${d.host}]` : d.host}:${d.port}`;

export class Upstreams {
  /** Idle connections are closed before the usual 5 s of an app's keep-alive (Node's default); a Keep-Alive hint shortens it. */
  readonly agent = new Agent({ keepAlive: true, timeout: 4_000, scheduling: "lifo" });
  private readonly sessions = new Map<string, ClientHttp2Session>();

  constructor(private readonly logger: Logger) {}

  /** The HTTP/2 session to `d`, opened on first use and again once it closed. */
  session(d: Destination): ClientHttp2Session {
    const address = addressOf(d);
    const open = this.sessions.get(address);
    if (open && !open.closed && !open.destroyed) return open;
    const session = connect(`http://${address}`);
    const forget = () => {
      if (this.sessions.get(address) === session) this.sessions.delete(address);
    };
    // Its streams report the failure to their callers; the session only has to go.
    session.on("error", (err) => {
      this.logger.debug({ upstream: address, err: err.message }, "HTTP/2 upstream session failed");
      forget();
    });
    session.on("goaway", forget);
    session.on("close", forget);
    this.sessions.set(address, session);
    return session;
  }

  close(): void {
    this.agent.destroy();
    for (const session of this.sessions.values()) session.destroy();
    this.sessions.clear();
  }
}

// The workstation's SOCKS5 proxy into the cluster (RFC 1928: no authentication, CONNECT,
// IPv4, IPv6 and domain-name addresses), each connection made with the tunnel's dial.
// The protocol is @mongodb-js/socksv5's (kept by MongoDB for mongosh); it answers success
// only once the dial has succeeded, so a target the cluster cannot reach is refused.
import * as socks from "@mongodb-js/socksv5/lib/server.js";
import None from "@mongodb-js/socksv5/lib/auth/None.js";
import { errorMessage } from "@ephemera/kit/errors";
import { splice } from "./http-proxy.js";
import type { Dial } from "./tunnel.js";

export type SocksServer = socks.Server;

export function createSocksProxy(dial: Dial, onError: (message: string) => void = () => {}): SocksServer {
  const server = socks.createServer((info, accept, deny) => {
    dial(info.dstAddr, info.dstPort).then((upstream) => {
      const client = accept(true);
      if (!client) {
        upstream.destroy();
        return;
      }
      splice(client, upstream);
    }, (err: unknown) => {
      onError(`SOCKS5 CONNECT ${info.dstAddr}:${info.dstPort}: ${errorMessage(err)}`);
      deny();
    });
  });
  server.useAuth(None());
  return server;
}

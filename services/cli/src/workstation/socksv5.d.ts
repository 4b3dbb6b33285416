// The part of @mongodb-js/socksv5 (no types of its own) that the SOCKS5 proxy uses: its
// server and its no-auth handler, each from its own file (the package's index finds its auth
// handlers by listing a directory at run time, which a bundle cannot follow).
declare module "@mongodb-js/socksv5/lib/server.js" {
  import type { AddressInfo, Socket } from "node:net";

  export interface ConnectionInfo {
    cmd: "connect";
    srcAddr: string;
    srcPort: number;
    /** An IPv4 or IPv6 address, or the domain name the client sent (socks5h). */
    dstAddr: string;
    dstPort: number;
  }

  export interface Auth {
    METHOD: number;
  }

  export interface Server {
    useAuth(auth: Auth): Server;
    listen(port: number, host: string, callback?: () => void): Server;
    address(): AddressInfo | string | null;
    close(callback?: (err?: Error) => void): Server;
    on(event: "error", listener: (err: Error) => void): Server;
  }

  /** accept(true) answers success and hands over the client's socket; deny() answers "not allowed". */
  export function createServer(listener: (info: ConnectionInfo, accept: (intercept: true) => Socket | undefined, deny: () => void) => void): Server;

}

declare module "@mongodb-js/socksv5/lib/auth/None.js" {
  import type { Auth } from "@mongodb-js/socksv5/lib/server.js";

  export default function None(): Auth;
}

// The tunnel client library behind OpenTunnel: loaded only by the daemon, so no other command
// pays for HTTP/2 and the client.
import { hostname } from "node:os";
import { TunnelClient } from "@ephemera/tunnel/client";
import type { OpenTunnel } from "./tunnel.js";

export const openTunnel: OpenTunnel = (options) => TunnelClient.connect({ client: `eph/0.1.0 ${hostname()}`, ...options });

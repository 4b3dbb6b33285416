// The cluster DNS server: UDP and TCP on one port, answering the cluster domain from the
// store (dns-answer.ts) and relaying every other query, as it came, to the machine's own
// resolvers (over the transport it came by); a query they do not answer gets SERVFAIL.
// Messages are read and written by dns-packet.
import { createSocket, type Socket } from "node:dgram";
import { connect, createServer, isIP, type Server } from "node:net";
import dnsPacket, { type DecodedPacket, type Packet } from "dns-packet";
import { serverFailure } from "./dns-answer.js";

const FORWARD_TIMEOUT_MS = 2000;
const TCP_IDLE_MS = 10_000;
/** A UDP answer larger than the client takes (512 bytes without EDNS) is sent truncated, so the client asks again over TCP. */
const UDP_DEFAULT_MAX = 512;

export interface DnsServerOptions {
  /** The address to listen on (the Docker bridge's gateway). */
  host: string;
  answer(query: DecodedPacket): Packet | undefined;
  /** `ip`, `ip:port` or `[ipv6]:port`, as dns.getServers() gives them. */
  upstream: string[];
}

export interface DnsServer { host: string; port: number; close(): Promise<void> }

interface Upstream { host: string; port: number; family: 4 | 6 }

export function parseUpstream(server: string): Upstream {
  const bracketed = /^\[(.+)\](?::(\d+))?$/.exec(server);
  if (bracketed) return { host: bracketed[1]!, port: Number(bracketed[2] ?? 53), family: 6 };
  if (isIP(server) === 6) return { host: server, port: 53, family: 6 };
  const [host = "", port = "53"] = server.split(":");
  return { host, port: Number(port), family: 4 };
}

export async function startDnsServer(options: DnsServerOptions): Promise<DnsServer> {
  const upstream = options.upstream.map(parseUpstream);
  const respond = async (message: Buffer, tcp: boolean): Promise<Buffer | undefined> => {
    let query: DecodedPacket;
    try { query = dnsPacket.decode(message); } catch { return undefined; }
    if (query.type !== "query") return undefined;
    try {
      const local = options.answer(query);
      if (local) return tcp ? dnsPacket.encode(local) : fitUdp(local, query);
    } catch {
      // An answer that cannot be written (an Endpoints address that is no IP): the client is told the server failed.
      return dnsPacket.encode(serverFailure(query));
    }
    for (const server of upstream) {
      const answered = await (tcp ? forwardTcp : forwardUdp)(message, server).catch(() => undefined);
      if (answered) return answered;
    }
    return dnsPacket.encode(serverFailure(query));
  };
  for (let attempt = 0; ; attempt++) {
    const udp = createSocket("udp4");
    const port = await new Promise<number>((ok, fail) => {
      udp.once("error", fail);
      udp.bind({ address: options.host, port: 0 }, () => ok(udp.address().port));
    });
    udp.on("message", (message, from) => {
      void respond(message, false).then((out) => { if (out) udp.send(out, from.port, from.address); });
    });
    const tcp = createServer((socket) => {
      socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
      socket.on("error", () => undefined);
      let buffered = Buffer.alloc(0);
      socket.on("data", (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
          const message = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
          buffered = buffered.subarray(2 + message.length);
          void respond(message, true).then((out) => { if (out && !socket.destroyed) socket.write(frame(out)); });
        }
      });
    });
    // The TCP port of the same number may be taken: then another UDP port, a few times.
    const listening = await new Promise<boolean>((ok, fail) => {
      tcp.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" && attempt < 10 ? ok(false) : fail(err)));
      tcp.listen(port, options.host, () => ok(true));
    });
    if (!listening) { udp.close(); continue; }
    udp.on("error", () => undefined);
    return { host: options.host, port, close: () => closeBoth(udp, tcp) };
  }
}

function closeBoth(udp: Socket, tcp: Server): Promise<void> {
  udp.close();
  return new Promise((ok) => tcp.close(() => ok()));
}

const frame = (message: Buffer) => Buffer.concat([Buffer.from([message.length >> 8, message.length & 255]), message]);

function fitUdp(packet: Packet, query: DecodedPacket): Buffer {
  const opt = query.additionals?.find((a) => a.type === "OPT") as { udpPayloadSize?: number } | undefined;
  const max = Math.max(UDP_DEFAULT_MAX, opt?.udpPayloadSize ?? 0);
  const encoded = dnsPacket.encode(packet);
  if (encoded.length <= max) return encoded;
  return dnsPacket.encode({ ...packet, flags: (packet.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE, answers: [], authorities: [] });
}

/** The query as it came, to one upstream server; its answer (same id), or a rejection at the deadline. */
function forwardUdp(message: Buffer, server: Upstream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = createSocket(server.family === 6 ? "udp6" : "udp4");
    let finished = false;
    const done = (err?: Error, answer?: Buffer) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.close();
      if (answer) resolve(answer);
      else reject(err);
    };
    const timer = setTimeout(() => done(new Error(`no answer from ${server.host}:${server.port}`)), FORWARD_TIMEOUT_MS);
    socket.on("error", (err) => done(err));
    socket.on("message", (answer) => { if (answer.length >= 2 && answer.readUInt16BE(0) === message.readUInt16BE(0)) done(undefined, answer); });
    socket.send(message, server.port, server.host);
  });
}

function forwardTcp(message: Buffer, server: Upstream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(server.port, server.host);
    let buffered = Buffer.alloc(0);
    const done = (err?: Error, answer?: Buffer) => {
      socket.destroy();
      if (answer) resolve(answer);
      else reject(err ?? new Error(`no answer from ${server.host}:${server.port}`));
    };
    socket.setTimeout(FORWARD_TIMEOUT_MS, () => done());
    socket.on("error", (err) => done(err));
    socket.on("close", () => done());
    socket.on("data", (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) done(undefined, buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
    });
    socket.write(frame(message));
  });
}

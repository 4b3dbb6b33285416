// `eph local connect --hosts`: each cluster Service gets a loopback address of its own
// (127.77.x.y, derived from its name so it stays the same across reconnects), a marked
// block in the hosts file maps `<svc>.<ns>.svc` and `<svc>.<ns>` to it, and a listener on
// each of the Service's ports forwards through the tunnel's dial. Writing the hosts file
// needs root; everything else does not (Linux routes all of 127/8 to loopback).
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { errorMessage } from "@ephemera/kit/errors";
import { splice } from "./http-proxy.js";
import type { ClusterService, Dial } from "./tunnel.js";

export const BEGIN = "# BEGIN ephemera local (eph local connect --hosts; removed by eph local disconnect)";
export const END = "# END ephemera local";

export interface HostEntry {
  names: string[];
  address: string;
  ports: number[];
  /** What the tunnel dials: `<svc>.<ns>.svc`. */
  target: string;
}

/** 127.77.x.y for each Service, from a hash of its name; a collision takes the next free one. */
export function hostEntries(services: ClusterService[]): HostEntry[] {
  const taken = new Set<number>();
  const sorted = [...services].sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`));
  return sorted.map((s) => {
    // 256 × 254 addresses: x in 0..255, y in 1..254.
    let slot = createHash("sha256").update(`${s.namespace}/${s.name}`).digest().readUInt16BE(0) % (256 * 254);
    while (taken.has(slot)) slot = (slot + 1) % (256 * 254);
    taken.add(slot);
    const address = `127.77.${Math.floor(slot / 254)}.${(slot % 254) + 1}`;
    return { names: [`${s.name}.${s.namespace}.svc`, `${s.name}.${s.namespace}`], address, ports: s.ports, target: `${s.name}.${s.namespace}.svc` };
  });
}

/** The hosts file's text with ephemera's block replaced by `entries` (or removed when none). */
export function withBlock(text: string, entries: HostEntry[]): string {
  const lines = text.split("\n");
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END, begin);
  const kept = begin >= 0 && end > begin ? [...lines.slice(0, begin), ...lines.slice(end + 1)] : lines;
  while (kept.length && kept[kept.length - 1] === "") kept.pop();
  const block = entries.length ? [BEGIN, ...entries.map((e) => `${e.address}\t${e.names.join(" ")}`), END] : [];
  return `${[...kept, ...block].join("\n")}\n`;
}

export class HostsError extends Error {
  override readonly name = "HostsError";
}

/** Rewrites the block in place (/etc/hosts is often a bind mount, which a rename would break). */
export async function writeHosts(file: string, entries: HostEntry[]): Promise<void> {
  let text = "";
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new HostsError(`cannot read ${file}: ${errorMessage(err)}`, { cause: err });
  }
  const next = withBlock(text, entries);
  if (next === text) return;
  try {
    await writeFile(file, next);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "EACCES" || code === "EPERM" || code === "EROFS" ? "host entries need root" : "host entries are off";
    throw new HostsError(`${why} (cannot write ${file}: ${code ?? errorMessage(err)}); the proxies and the served locals work without them`, { cause: err });
  }
}

/** The listeners of the host entries: one per address and port, each connection dialled as `<svc>.<ns>.svc:port`. */
export class HostListeners {
  private readonly servers = new Map<string, Server>();

  constructor(private readonly dial: Dial, private readonly onError: (message: string) => void) {}

  /** Listens for every entry's ports, and stops listening for those no longer there. */
  async update(entries: HostEntry[]): Promise<void> {
    const wanted = new Map<string, { e: HostEntry; p: number }>(entries.flatMap((e) => e.ports.map((p) => [`${e.address}:${p}`, { e, p }])));
    for (const [key, server] of this.servers) {
      if (wanted.has(key)) continue;
      server.close();
      this.servers.delete(key);
    }
    for (const [key, { e, p }] of wanted) {
      if (this.servers.has(key)) continue;
      const server = createServer((socket) => {
        socket.on("error", () => socket.destroy());
        this.dial(e.target, p).then((upstream) => splice(socket, upstream), (err: unknown) => {
          this.onError(`${e.target}:${p}: ${errorMessage(err)}`);
          socket.destroy();
        });
      });
      try {
        await new Promise<void>((resolve, reject) => server.once("error", reject).listen(p, e.address, () => resolve()));
        this.servers.set(key, server);
      } catch (err) {
        this.onError(`cannot listen on ${key} for ${e.target}: ${errorMessage(err)}`);
      }
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.servers.values()].map((s) => new Promise((resolve) => s.close(resolve))));
    this.servers.clear();
  }
}

// `pods/log`: a container's log file, whole, its last lines, or followed until the
// container ends. The errors are the real server's (a container name is required when
// the pod has several; a container that has not started has no log yet).
import type { IncomingMessage, ServerResponse } from "node:http";
import { open, stat } from "node:fs/promises";
import { badRequest } from "../status.js";
import type { Obj } from "../store.js";

type Rec = Record<string, unknown>;
const FOLLOW_POLL_MS = 50;

export interface LogRequest {
  pod: Obj;
  container: string | null;
  follow: boolean;
  tailLines: number | undefined;
  /** The container's log file. */
  file: (container: string) => string;
  /** The pod as it stands now (to know when a followed container has ended). */
  current: () => Obj | undefined;
}

function containerNames(pod: Obj): { inits: string[]; mains: string[] } {
  const spec = pod["spec"] as Rec;
  const names = (l: unknown) => ((l ?? []) as Rec[]).map((c) => String(c["name"]));
  return { inits: names(spec["initContainers"]), mains: names(spec["containers"]) };
}

function stateOf(pod: Obj | undefined, container: string): Rec | undefined {
  const status = (pod?.["status"] ?? {}) as Rec;
  const all = [...((status["initContainerStatuses"] ?? []) as Rec[]), ...((status["containerStatuses"] ?? []) as Rec[])];
  return all.find((c) => c["name"] === container)?.["state"] as Rec | undefined;
}

/** Resolves the container; throws the real server's errors for a missing or ambiguous one. */
export function pickContainer(pod: Obj, requested: string | null): string {
  const { inits, mains } = containerNames(pod);
  const name = pod.metadata.name;
  if (requested) {
    if (![...inits, ...mains].includes(requested)) throw badRequest(`container ${requested} is not valid for pod ${name}`);
    return requested;
  }
  if (mains.length === 1) return mains[0]!;
  const initPart = inits.length ? ` or one of the init containers: [${inits.join(" ")}]` : "";
  throw badRequest(`a container name must be specified for pod ${name}, choose one of: [${mains.join(" ")}]${initPart}`);
}

export async function serveLog(_req: IncomingMessage, res: ServerResponse, r: LogRequest): Promise<void> {
  const container = pickContainer(r.pod, r.container);
  const state = stateOf(r.pod, container);
  const waiting = state?.["waiting"] as Rec | undefined;
  const file = r.file(container);
  const exists = await stat(file).then(() => true, () => false);
  if (waiting && !exists) {
    throw badRequest(`container "${container}" in pod "${r.pod.metadata.name}" is waiting to start: ${String(waiting["reason"] ?? "ContainerCreating")}`);
  }
  res.writeHead(200, { "Content-Type": "text/plain", ...(r.follow ? { "Transfer-Encoding": "chunked" } : {}) });
  if (!exists) { res.end(); return; }
  const fh = await open(file, "r");
  try {
    let offset = 0;
    const { size } = await fh.stat();
    if (r.tailLines !== undefined) {
      const all = (await fh.readFile()).toString("utf8");
      const lines = all.split("\n");
      if (lines[lines.length - 1] === "") lines.pop();
      const kept = lines.slice(Math.max(0, lines.length - r.tailLines));
      res.write(kept.length ? `${kept.join("\n")}\n` : "");
      offset = size;
    }
    let closed = false;
    res.on("close", () => { closed = true; });
    for (;;) {
      const buf = Buffer.alloc(64 * 1024);
      const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
      if (bytesRead > 0) { offset += bytesRead; res.write(buf.subarray(0, bytesRead)); continue; }
      if (!r.follow || closed) break;
      const now = r.current();
      const s = stateOf(now, container);
      // Ended (or gone): one last read above found nothing more, so the log is complete.
      if (!now || now.metadata.uid !== r.pod.metadata.uid || s?.["terminated"]) {
        const rest = await fh.read(buf, 0, buf.length, offset);
        if (rest.bytesRead > 0) { offset += rest.bytesRead; res.write(buf.subarray(0, rest.bytesRead)); continue; }
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
    }
    res.end();
  } finally {
    await fh.close();
  }
}


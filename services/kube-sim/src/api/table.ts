// The `Table` form kubectl asks for (`Accept: …;as=Table;g=meta.k8s.io`): pods get the
// columns of `kubectl get pods` (NAME READY STATUS RESTARTS AGE), Services, Endpoints and
// EndpointSlices theirs (columns.ts), other kinds NAME AGE.
import type { ResourceType } from "../resources.js";
import type { Obj } from "../store.js";
import { PRINTERS } from "./columns.js";

type Rec = Record<string, unknown>;

export function age(createdIso: string, now: number): string {
  const s = Math.max(0, Math.floor((now - Date.parse(createdIso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 3600 * 2) return `${Math.floor(s / 60)}m`;
  if (s < 86400 * 2) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

interface ContainerStatus { name: string; ready?: boolean; restartCount?: number; state?: { waiting?: Rec; running?: Rec; terminated?: Rec } }

/** The STATUS column as kubectl words it. */
export function podStatusColumn(pod: Obj): string {
  const status = (pod["status"] ?? {}) as Rec;
  if (pod.metadata["deletionTimestamp"] && status["reason"] !== "NodeLost") return "Terminating";
  if (status["reason"]) return String(status["reason"]);
  const inits = (status["initContainerStatuses"] ?? []) as ContainerStatus[];
  for (const [i, c] of inits.entries()) {
    const t = c.state?.terminated;
    if (t && t["exitCode"] === 0) continue;
    if (t) return `Init:${String(t["reason"] ?? "Error")}`;
    const w = c.state?.waiting;
    if (w && w["reason"] !== "PodInitializing") return `Init:${String(w["reason"])}`;
    return `Init:${i}/${inits.length}`;
  }
  let reason = String(status["phase"] ?? "Pending");
  for (const c of ((status["containerStatuses"] ?? []) as ContainerStatus[])) {
    if (c.state?.waiting?.["reason"]) reason = String(c.state.waiting["reason"]);
    else if (c.state?.terminated) reason = String(c.state.terminated["reason"] ?? `ExitCode:${String(c.state.terminated["exitCode"])}`);
  }
  const running = ((status["containerStatuses"] ?? []) as ContainerStatus[]).some((c) => c.state?.running);
  if (reason === "Completed" && running) reason = "Running";
  return reason;
}

const column = (name: string, type: string, format = "", priority = 0) => ({ name, type, format, description: name, priority });

function partial(obj: Obj) {
  return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: obj.metadata };
}

export function toTable(objs: Obj[], resourceVersion: string, type: Pick<ResourceType, "group" | "plural">, fullObject: boolean, now: number) {
  const isPod = type.group === "" && type.plural === "pods";
  const printer = type.group === "" || type.group === "discovery.k8s.io" ? PRINTERS[type.plural] : undefined;
  const columnDefinitions = isPod
    ? [column("Name", "string", "name"), column("Ready", "string"), column("Status", "string"), column("Restarts", "string"), column("Age", "string"),
      column("IP", "string", "", 1), column("Node", "string", "", 1)]
    : printer?.columns ?? [column("Name", "string", "name"), column("Age", "string")];
  const rows = objs.map((o) => {
    const created = o.metadata.creationTimestamp;
    let cells: unknown[];
    if (isPod) {
      const cs = (((o["status"] as Rec | undefined)?.["containerStatuses"]) ?? []) as ContainerStatus[];
      const total = (((o["spec"] as Rec | undefined)?.["containers"]) as unknown[] | undefined)?.length ?? cs.length;
      const restarts = cs.reduce((n, c) => n + (c.restartCount ?? 0), 0);
      cells = [o.metadata.name, `${cs.filter((c) => c.ready).length}/${total}`, podStatusColumn(o), String(restarts), age(created, now),
        (o["status"] as Rec | undefined)?.["podIP"] ?? "<none>", (o["spec"] as Rec | undefined)?.["nodeName"] ?? "<none>"];
    } else if (printer) cells = printer.cells(o, age(created, now));
    else cells = [o.metadata.name, age(created, now)];
    return { cells, object: fullObject ? o : partial(o) };
  });
  return { kind: "Table", apiVersion: "meta.k8s.io/v1", metadata: { resourceVersion }, columnDefinitions, rows };
}

export const wantsTable = (accept: string | undefined) => !!accept && /as=Table/.test(accept.split(",")[0] ?? "");

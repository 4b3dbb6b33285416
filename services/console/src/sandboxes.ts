// The sandbox list as the console shows it: one row per sandbox, filtered by status, labels
// (globs, as a route group's match reads them) and a piece of the name, and the difference
// between two lists as the upserts and removals a list stream sends. Pure.
import * as pb from "@ephemera/proto";
import { routeGroupMatches } from "@ephemera/spec";
import { ConsoleRequestError } from "./errors.js";

export interface Row {
  name: string;
  cluster: string;
  ready: boolean;
  status: string;
  message: string;
  labels: Record<string, string>;
  createdAt: string;
  ttl: string;
  scheduledDeleteTime: string;
  routingKey: string;
  resources: number;
}

export interface SandboxFilter {
  /** Any of these status reasons; empty: every status. */
  statuses: string[];
  /** Every one of these labels, its value a glob. */
  labels: Array<{ key: string; glob: string }>;
  /** A piece of the name, case-insensitive; empty: any name. */
  q: string;
}

export function rowOf(view: pb.SandboxView): Row {
  return {
    name: view.name,
    cluster: view.spec?.cluster ?? "",
    ready: view.status?.ready ?? false,
    status: view.status?.reason ?? "",
    message: view.status?.message ?? "",
    labels: { ...(view.spec?.labels ?? {}) },
    createdAt: view.createdAt,
    ttl: view.spec?.ttl?.duration ?? "",
    scheduledDeleteTime: view.status?.scheduledDeleteTime ?? "",
    routingKey: view.routingKey,
    resources: view.resources.length,
  };
}

/** The filter a query string asks for; a label that is not `key=glob` is refused, naming it. */
export function parseFilter(query: URLSearchParams): SandboxFilter {
  const labels = query.getAll("label").filter(Boolean).map((text) => {
    const i = text.indexOf("=");
    if (i <= 0) throw new ConsoleRequestError(400, "INVALID_ARGUMENT", `label filter "${text}" is not <key>=<glob>`);
    return { key: text.slice(0, i), glob: text.slice(i + 1) };
  });
  return { statuses: query.getAll("status").filter(Boolean), labels, q: (query.get("q") ?? "").trim().toLowerCase() };
}

export function matches(row: Row, filter: SandboxFilter): boolean {
  if (filter.statuses.length && !filter.statuses.includes(row.status)) return false;
  if (filter.q && !row.name.toLowerCase().includes(filter.q)) return false;
  return filter.labels.every(({ key, glob }) => routeGroupMatches(pb.RouteGroupMatch.fromPartial({ label: { key, value: glob } }), row.labels));
}

export interface SandboxList {
  /** Every sandbox, filtered or not. */
  total: number;
  sandboxes: Row[];
  /** How many sandboxes have each status, over the unfiltered set (the page's filter chips). */
  statuses: Record<string, number>;
}

export function sandboxList(views: pb.SandboxView[], filter: SandboxFilter): SandboxList {
  const rows = views.map(rowOf);
  const statuses: Record<string, number> = {};
  for (const row of rows) statuses[row.status] = (statuses[row.status] ?? 0) + 1;
  return { total: rows.length, sandboxes: rows.filter((row) => matches(row, filter)), statuses };
}

export type RowChange = { kind: "upsert"; row: Row } | { kind: "remove"; name: string };

/** What changed from `before` to `after` (rows keyed by name): new or different rows, then the ones gone. */
export function diffRows(before: ReadonlyMap<string, Row>, after: readonly Row[]): RowChange[] {
  const changes: RowChange[] = [];
  const seen = new Set<string>();
  for (const row of after) {
    seen.add(row.name);
    const old = before.get(row.name);
    if (!old || JSON.stringify(old) !== JSON.stringify(row)) changes.push({ kind: "upsert", row });
  }
  for (const name of before.keys()) if (!seen.has(name)) changes.push({ kind: "remove", name });
  return changes;
}

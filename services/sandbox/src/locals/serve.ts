// LocalService.Serve: which local workloads a workstation may serve. The tunnel service asks
// with the workstation's own token, so the API's roles decide (the guard admits editors only).
import type * as pb from "@ephemera/proto";
import { ConflictError, NotFoundError } from "@ephemera/kit";
import type { SandboxRecord, SandboxState } from "../sandbox/state.js";

/** The sandboxes as the core holds them, by name. */
export interface LocalsSource {
  sandbox(name: string): SandboxState | undefined;
  sandboxes(): Iterable<SandboxState>;
}

const servedOf = (s: SandboxRecord): pb.ServedLocal[] =>
  (s.spec?.local ?? []).map((local) => ({ sandbox: s.name, routingKey: s.routingKey, cluster: s.cluster, local, status: "" }));

/**
 * The local entries of the named sandboxes, or of every active sandbox that has any when none
 * is named. A named sandbox unknown or deleted is NOT_FOUND; being deleted, or without a local
 * entry, FAILED_PRECONDITION: nothing of it can be served.
 */
export function serveLocals(source: LocalsSource, names: readonly string[]): pb.ServedLocal[] {
  if (names.length === 0) {
    const all: pb.ServedLocal[] = [];
    for (const s of source.sandboxes()) if (s.status === "active") all.push(...servedOf(s));
    return all.sort((a, b) => a.sandbox.localeCompare(b.sandbox) || a.local!.name.localeCompare(b.local!.name));
  }
  return [...new Set(names)].flatMap((name) => {
    const s = source.sandbox(name);
    if (!s || s.status === "none" || s.status === "deleted") throw new NotFoundError(`sandbox ${name} not found`);
    if (s.status === "deleting") throw new ConflictError(`sandbox ${name} is being deleted: its local workloads cannot be served`);
    const served = servedOf(s);
    if (served.length === 0) throw new ConflictError(`sandbox ${name} has no local entry (spec.local) to serve`);
    return served;
  });
}

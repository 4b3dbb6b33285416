// The job runner group decider: create, update (all but cluster and namespace may change)
// and delete. A group deleted and applied again is a new group.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { NotFoundError, ValidationError, type FieldViolation } from "@ephemera/kit";
import { canonicalJson } from "@ephemera/spec";
import type { JobRunnerGroupState } from "./state.js";

export type JobRunnerGroupCommand = { kind: "apply"; group: pb.JobRunnerGroup } | { kind: "delete"; name: string };

/** Where the pods live: changing it would strand the running ones. */
const IMMUTABLE = new Set(["spec.cluster", "spec.namespace"]);

export function decideJobRunnerGroup(command: JobRunnerGroupCommand, state: JobRunnerGroupState): DomainEvent[] {
  switch (command.kind) {
    case "apply": {
      const { group } = command;
      const spec = group.spec!;
      if (state.status !== "active") return [ev("ephemera.jobrunnergroup.created.v1", { name: group.name, spec })];
      const changes = groupSpecChanges(state.spec, spec);
      if (changes.length === 0) return [];
      const immutable: FieldViolation[] = changes.filter((c) => IMMUTABLE.has(c.field)).map((c) => ({
        field: c.field, rule: "immutable",
        description: `${c.field} cannot change (${c.oldJson} → ${c.newJson}): delete the job runner group and apply it again`,
      }));
      if (immutable.length) throw new ValidationError(immutable, `job runner group ${group.name} cannot be updated so`);
      return [ev("ephemera.jobrunnergroup.updated.v1", { spec, changes })];
    }
    case "delete":
      if (state.status !== "active") throw new NotFoundError(`job runner group ${command.name} not found`);
      return [ev("ephemera.jobrunnergroup.deleted.v1", {})];
  }
}

/** The top-level spec fields that differ, old and new as JSON (the pod template as the object it is). */
export function groupSpecChanges(before: pb.JobRunnerGroupSpec, after: pb.JobRunnerGroupSpec): pb.SpecChange[] {
  const a = asDoc(before);
  const b = asDoc(after);
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()
    .filter((f) => canonicalJson(a[f] ?? null) !== canonicalJson(b[f] ?? null))
    .map((f) => ({ field: `spec.${f}`, oldJson: JSON.stringify(a[f] ?? null), newJson: JSON.stringify(b[f] ?? null) }));
}

function asDoc(spec: pb.JobRunnerGroupSpec): Record<string, unknown> {
  const doc = pb.JobRunnerGroupSpec.toJSON(spec) as Record<string, unknown>;
  if (spec.podTemplate) doc.podTemplate = JSON.parse(spec.podTemplate) as unknown;
  return doc;
}

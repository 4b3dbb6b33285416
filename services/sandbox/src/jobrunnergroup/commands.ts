// The job runner group commands behind the API: apply (create or update), get, list and
// delete, over the group projection.
import * as pb from "@ephemera/proto";
import { encode } from "@ephemera/events";
import { execute, type CommandMeta, type EventStore, type Projection } from "@ephemera/eventstore";
import { NotFoundError } from "@ephemera/kit";
import { jobRunnerGroupToDoc, validateJobRunnerGroup } from "@ephemera/spec";
import { decideJobRunnerGroup, groupSpecChanges } from "./decide.js";
import { initialJobRunnerGroup, type JobRunnerGroupRecord, type JobRunnerGroupState } from "./state.js";
import { jobRunnerGroupView, type GroupPodsReport } from "./view.js";

export interface JobRunnerGroupDeps {
  store: EventStore;
  projection: Projection<JobRunnerGroupState>;
  /** The runner's reports of the groups' ready pods (aggregate jobpods). */
  pods: Projection<GroupPodsReport>;
}

export class JobRunnerGroups {
  constructor(private readonly deps: JobRunnerGroupDeps) {}

  async apply(request: pb.JobRunnerGroup | undefined, meta: CommandMeta, dryRun = false): Promise<pb.ApplyJobRunnerGroupResponse> {
    const group = validateJobRunnerGroup(jobRunnerGroupToDoc(request ?? pb.JobRunnerGroup.fromPartial({})));
    const existing = this.deps.projection.get(group.name)?.state;
    const active = existing?.status === "active" ? existing : undefined;
    const decide = (state: JobRunnerGroupState) => decideJobRunnerGroup({ kind: "apply", group }, state);
    if (dryRun) {
      const events = decide(existing ?? initialJobRunnerGroup());
      const now = new Date(0).toISOString();
      const would: JobRunnerGroupRecord = active
        ? { ...active, spec: group.spec! }
        : { status: "active", name: group.name, spec: group.spec!, createdAt: now, updatedAt: now };
      return {
        jobRunnerGroup: jobRunnerGroupView(would, active ? this.report(group.name) : undefined), created: !active, unchanged: events.length === 0,
        changes: active ? groupSpecChanges(active.spec, group.spec!) : [],
      };
    }
    const { appended } = await execute(this.deps.store, this.deps.projection, group.name, (state) => decide(state).map(encode), meta);
    const changes = appended && active ? groupSpecChanges(active.spec, group.spec!) : [];
    return { jobRunnerGroup: this.get(group.name), created: !!appended && !active, unchanged: !appended, changes };
  }

  get(name: string): pb.JobRunnerGroupView {
    return jobRunnerGroupView(this.record(name), this.report(name));
  }

  private report(name: string): GroupPodsReport {
    return this.deps.pods.get(name)?.state;
  }

  /** The group that exists now by this name; NOT_FOUND otherwise. */
  record(name: string): JobRunnerGroupRecord {
    const state = this.deps.projection.get(name)?.state;
    if (state?.status !== "active") throw new NotFoundError(`job runner group ${name} not found`);
    return state;
  }

  list(): pb.JobRunnerGroupView[] {
    return [...this.records()].map((g) => jobRunnerGroupView(g, this.report(g.name))).sort((a, b) => a.name.localeCompare(b.name));
  }

  async delete(name: string, meta: CommandMeta): Promise<pb.JobRunnerGroupView> {
    const before = this.record(name);
    await execute(this.deps.store, this.deps.projection, name, (state) => decideJobRunnerGroup({ kind: "delete", name }, state).map(encode), meta);
    return jobRunnerGroupView({ ...before, status: "deleted" }, this.report(name));
  }

  *records(): Iterable<JobRunnerGroupRecord> {
    for (const [, { state }] of this.deps.projection.entries()) if (state.status === "active") yield state;
  }
}

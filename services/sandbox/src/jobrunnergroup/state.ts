// The job runner group aggregate's state and its evolve: the spec it was created or last
// updated with, and whether it still exists.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export interface JobRunnerGroupRecord {
  status: "active" | "deleted";
  name: string;
  spec: pb.JobRunnerGroupSpec;
  createdAt: string;
  updatedAt: string;
}

export type JobRunnerGroupState = { status: "none" } | JobRunnerGroupRecord;

export const initialJobRunnerGroup = (): JobRunnerGroupState => ({ status: "none" });

export function evolveJobRunnerGroup(state: JobRunnerGroupState, event: DomainEvent, time: string): JobRunnerGroupState {
  switch (event.type) {
    case "ephemera.jobrunnergroup.created.v1":
      return { status: "active", name: event.data.name, spec: event.data.spec!, createdAt: time, updatedAt: time };
    case "ephemera.jobrunnergroup.updated.v1":
      return state.status === "none" ? state : { ...state, spec: event.data.spec!, updatedAt: time };
    case "ephemera.jobrunnergroup.deleted.v1":
      return state.status === "none" ? state : { ...state, status: "deleted", updatedAt: time };
    default:
      return state;
  }
}

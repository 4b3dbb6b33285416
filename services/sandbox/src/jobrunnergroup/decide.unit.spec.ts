// The job runner group decider, given events, when a command, then events or an error.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { NotFoundError, ValidationError } from "@ephemera/kit";
import { decideJobRunnerGroup } from "./decide.js";
import { evolveJobRunnerGroup, initialJobRunnerGroup, type JobRunnerGroupState } from "./state.js";

const spec = (over: Partial<pb.JobRunnerGroupSpec> = {}) => pb.JobRunnerGroupSpec.fromPartial({
  cluster: "c1", namespace: "jobs", image: "ubuntu:24.04", podTemplate: '{"spec":{"containers":[{"name":"main"}]}}',
  scaling: { manual: { desiredPods: 2 } }, ...over,
});
const apply = (s = spec()) => ({ kind: "apply" as const, group: { name: "g", spec: s } });
const given = (...events: DomainEvent[]): JobRunnerGroupState => events.reduce((s, e) => evolveJobRunnerGroup(s, e, "t"), initialJobRunnerGroup());
const created = ev("ephemera.jobrunnergroup.created.v1", { name: "g", spec: spec() });

describe("a job runner group", () => {
  it("is created with its spec", () => {
    expect(decideJobRunnerGroup(apply(), given())).toEqual([created]);
  });

  it("applied again unchanged appends nothing; a template written in another key order is the same template", () => {
    expect(decideJobRunnerGroup(apply(), given(created))).toEqual([]);
    const reordered = spec({ podTemplate: '{ "spec": { "containers": [ { "name": "main" } ] } }' });
    expect(decideJobRunnerGroup(apply(reordered), given(created))).toEqual([]);
  });

  it("is updated when its image, template or pods change, each change named", () => {
    const next = spec({ image: "ubuntu:25.04", podTemplate: '{"spec":{"containers":[{"name":"main","tty":true}]}}' });
    expect(decideJobRunnerGroup(apply(next), given(created))).toEqual([ev("ephemera.jobrunnergroup.updated.v1", {
      spec: next,
      changes: [
        { field: "spec.image", oldJson: '"ubuntu:24.04"', newJson: '"ubuntu:25.04"' },
        { field: "spec.podTemplate", oldJson: '{"spec":{"containers":[{"name":"main"}]}}', newJson: '{"spec":{"containers":[{"name":"main","tty":true}]}}' },
      ],
    })]);
  });

  it("keeps its cluster and namespace: both named in one error", () => {
    const err = (() => { try { decideJobRunnerGroup(apply(spec({ cluster: "c2", namespace: "other" })), given(created)); } catch (e) { return e; } })();
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).violations.map((v) => [v.field, v.rule])).toEqual([["spec.cluster", "immutable"], ["spec.namespace", "immutable"]]);
  });

  it("is deleted once; a deleted group applied again is created anew", () => {
    const deleted = ev("ephemera.jobrunnergroup.deleted.v1", {});
    expect(decideJobRunnerGroup({ kind: "delete", name: "g" }, given(created))).toEqual([deleted]);
    expect(() => decideJobRunnerGroup({ kind: "delete", name: "g" }, given(created, deleted))).toThrow(NotFoundError);
    expect(decideJobRunnerGroup(apply(), given(created, deleted))).toEqual([created]);
  });
});

// The job runner group and job files as the proto messages the services keep, and back.
import * as pb from "@ephemera/proto";
import { loadFixture } from "./fixtures.testkit.js";
import { baseJob, baseJobRunnerGroup } from "./invalid.testkit.js";
import { jobRunnerGroupToDoc, jobToDoc, validateJob, validateJobRunnerGroup } from "./validate.js";

describe("a job runner group file", () => {
  it("becomes a group whose pod template is JSON text, null fields kept", async () => {
    const group = validateJobRunnerGroup(await loadFixture("jobs/runner-group.yaml"));
    expect(group.name).toBe("e2e-runners");
    expect(group.spec).toMatchObject({ cluster: "local", namespace: "ephemera-jobs", jobTimeout: "1h", image: "ubuntu:24.04", labels: { team: "shop" } });
    expect(JSON.parse(group.spec!.podTemplate)).toEqual({
      metadata: { creationTimestamp: null },
      spec: { containers: [{ image: "ubuntu:24.04", name: "main", resources: {} }] },
    });
    expect(group.spec!.scaling?.manual?.desiredPods).toBe(2);
  });

  it("keeps one pod and no template when it names neither", () => {
    const doc = baseJobRunnerGroup();
    delete doc.spec.scaling;
    delete doc.spec.podTemplate;
    const group = validateJobRunnerGroup(doc);
    expect(group.spec!.scaling?.manual?.desiredPods).toBe(1);
    expect(group.spec!.podTemplate).toBe("");
  });

  it("reads back as the file it came from", () => {
    const group = validateJobRunnerGroup(baseJobRunnerGroup());
    const again = validateJobRunnerGroup(jobRunnerGroupToDoc(group));
    expect(pb.JobRunnerGroup.toJSON(again)).toEqual(pb.JobRunnerGroup.toJSON(group));
    expect(jobRunnerGroupToDoc(group)).toEqual(baseJobRunnerGroup());
  });
});

describe("a job file", () => {
  it("becomes a job without a name, every field kept", async () => {
    const job = validateJob(await loadFixture("jobs/job.yaml"));
    expect(job.name).toBe("");
    expect(job.spec).toMatchObject({
      namePrefix: "orders-e2e", runnerGroup: "e2e-runners", command: [],
      routingContext: { sandbox: "feature-x", routegroup: "" },
      uploadArtifact: [{ path: "/tmp/reports/health.json", meta: { format: "json" } }],
    });
    expect(job.spec!.script.startsWith("#!/bin/bash\n")).toBe(true);
  });

  it("may run a command instead, without a routing context", () => {
    const doc = baseJob();
    delete doc.spec.script;
    delete doc.spec.routingContext;
    doc.spec.command = ["make", "e2e"];
    expect(validateJob(doc).spec).toMatchObject({ command: ["make", "e2e"], script: "" });
  });

  it("reads back as the file it came from", () => {
    const job = validateJob(baseJob());
    expect(jobToDoc(job)).toEqual(baseJob());
  });
});

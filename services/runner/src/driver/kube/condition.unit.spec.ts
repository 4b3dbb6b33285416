import { conditionOf } from "./driver.js";

const waiting = (name: string, reason: string) => ({ name, state: { waiting: { reason } } });

describe("the condition a grace counts in", () => {
  it("is a failing pull of any kind, the same while ErrImagePull and ImagePullBackOff alternate", () => {
    const err = conditionOf({ phase: "Pending", containerStatuses: [waiting("main", "ErrImagePull")] });
    expect(err).not.toBe("");
    expect(conditionOf({ phase: "Pending", containerStatuses: [waiting("main", "ImagePullBackOff")] })).toBe(err);
    expect(conditionOf({ phase: "Pending", containerStatuses: [waiting("main", "InvalidImageName")] })).toBe(err);
    expect(conditionOf({ phase: "Pending", initContainerStatuses: [waiting("ephemera-init", "ErrImageNeverPull")] })).not.toBe("");
  });

  it("is the pod being Unknown", () => {
    expect(conditionOf({ phase: "Unknown" })).toMatch(/^Unknown/);
  });

  it("is none while a pod starts or runs normally", () => {
    expect(conditionOf({ phase: "Pending", containerStatuses: [waiting("main", "ContainerCreating")] })).toBe("");
    expect(conditionOf({ phase: "Running", containerStatuses: [{ name: "main", state: { running: {} } }] })).toBe("");
  });
});

import { FORK_KINDS, baselineOf, forkName, isForkKind, localServiceName } from "./fork-name.js";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

describe("a fork's name", () => {
  it("is <baseline>-<routing key> while that fits in 63 characters, exactly as before hashing existed", () => {
    expect(forkName("orders", "rk1")).toBe("orders-rk1");
    const longest = "a".repeat(50);
    expect(forkName(longest, "abcdef123456")).toBe(`${longest}-abcdef123456`);
    expect(forkName(longest, "abcdef123456")).toHaveLength(63);
  });

  it("is cut and given a hash of the whole name when it does not fit, so baselines sharing their first 63 characters get two forks", () => {
    const prefix = "payments-reconciliation-service-with-a-very-long-name-for-the-eu-region";
    const a = forkName(`${prefix}-a`, "abcdef123456");
    const b = forkName(`${prefix}-b`, "abcdef123456");
    expect(a).not.toBe(b);
    for (const name of [a, b]) {
      expect(name.length).toBeLessThanOrEqual(63);
      expect(name).toMatch(DNS_LABEL);
      expect(name.endsWith("-abcdef123456")).toBe(true);
      expect(name.startsWith("payments-reconciliation-service")).toBe(true);
    }
    // One character over the limit is cut too, and no longer collides with the name cut to the same prefix.
    expect(forkName("a".repeat(51), "abcdef123456")).not.toBe(forkName("a".repeat(52), "abcdef123456"));
  });

  it("is the same each time, and a valid DNS label whatever the length and where the cut falls", () => {
    expect(forkName("x".repeat(80), "abcdef123456")).toBe(forkName("x".repeat(80), "abcdef123456"));
    for (let n = 1; n <= 253; n++) {
      // A '-' at every other place, so that some cut ends on one.
      const name = Array.from({ length: n }, (_, i) => (i % 7 === 6 && i < n - 1 ? "-" : "b")).join("");
      const fork = forkName(name, "abcdef123456");
      expect(fork.length).toBeLessThanOrEqual(63);
      expect(fork).toMatch(DNS_LABEL);
    }
  });
});

describe("the kinds a fork may copy", () => {
  it("are Deployment, Rollout and StatefulSet, as Kubernetes spells them", () => {
    expect(FORK_KINDS).toEqual(["Deployment", "Rollout", "StatefulSet"]);
    expect(isForkKind("Deployment")).toBe(true);
    expect(isForkKind("deployment")).toBe(false);
    expect(isForkKind("Banana")).toBe(false);
  });

  it("default to Deployment in namespace default", () => {
    expect(baselineOf({ name: "orders" })).toEqual({ kind: "Deployment", namespace: "default", name: "orders" });
  });
});

describe("a local workload's Service name", () => {
  it("is the baseline Service's with the routing key and -local, apart from the fork's, and cut as fork names are", () => {
    expect(localServiceName("backend", "k3fd0c2a91b7")).toBe("backend-k3fd0c2a91b7-local");
    expect(localServiceName("backend", "k3fd0c2a91b7")).not.toBe(forkName("backend", "k3fd0c2a91b7"));
    const long = localServiceName("a".repeat(70), "k3fd0c2a91b7");
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long.endsWith("-k3fd0c2a91b7-local")).toBe(true);
  });
});

import type { ApiError } from "../status.js";
import type { Obj } from "../store.js";
import { parseCidr } from "./cidr.js";
import { ClusterIPs } from "./cluster-ips.js";

const svc = (name: string, spec: Record<string, unknown> = {}): Obj =>
  ({ metadata: { name, namespace: "ns", uid: name, resourceVersion: "1", creationTimestamp: "" }, spec: { type: "ClusterIP", ...spec } });

/** An allocator over a /29 (six usable addresses) holding `stored`. */
function allocator(stored: Obj[] = []) {
  const services = [...stored];
  const ips = new ClusterIPs(parseCidr("10.96.7.0/29"), () => services);
  return { ips, create: (s: Obj) => { const made = ips.assign(s); services.push(made); return made; } };
}
const ipOf = (s: Obj) => (s["spec"] as Record<string, unknown>)["clusterIP"];
const refusal = (fn: () => unknown): { code: number; message: string; field?: string } => {
  try { fn(); } catch (err) {
    const e = err as ApiError;
    return { code: e.code, message: e.message, field: e.details?.causes?.[0]?.field };
  }
  throw new Error("expected a refusal");
};

it("hands out the lowest free address of the range, never the network or broadcast address", () => {
  const { create } = allocator();
  const made = ["a", "b", "c", "d", "e", "f"].map((n) => ipOf(create(svc(n))));
  expect(made).toEqual(["10.96.7.1", "10.96.7.2", "10.96.7.3", "10.96.7.4", "10.96.7.5", "10.96.7.6"]);
  expect(refusal(() => create(svc("g")))).toMatchObject({ code: 500, message: expect.stringContaining("range is full (10.96.7.0/29)") });
});

it("keeps the address a client asks for when it is in range and free, and refuses it otherwise naming spec.clusterIPs[0]", () => {
  const { create } = allocator();
  expect(create(svc("a", { clusterIP: "10.96.7.5" }))["spec"]).toMatchObject({ clusterIP: "10.96.7.5", clusterIPs: ["10.96.7.5"], ipFamilies: ["IPv4"] });
  expect(ipOf(create(svc("b", { clusterIPs: ["10.96.7.3"] })))).toBe("10.96.7.3");
  expect(ipOf(create(svc("c")))).toBe("10.96.7.1");
  expect(refusal(() => create(svc("d", { clusterIP: "10.96.7.5" })))).toEqual({
    code: 422, field: "spec.clusterIPs[0]",
    message: 'Service "d" is invalid: spec.clusterIPs[0]: Invalid value: "10.96.7.5": failed to allocate IP 10.96.7.5: provided IP is already allocated',
  });
  expect(refusal(() => create(svc("e", { clusterIP: "10.0.0.1" }))).message).toContain("is not in the valid range. The range of valid IPs is 10.96.7.0/29");
  expect(refusal(() => create(svc("f", { clusterIP: "10.96.7.300" }))).message).toContain("must be a valid IP address");
});

it("makes a Service headless with None, refuses None for a NodePort, and gives an ExternalName Service no address", () => {
  const { create } = allocator();
  expect(create(svc("h", { clusterIP: "None" }))["spec"]).toMatchObject({ clusterIP: "None", clusterIPs: ["None"] });
  expect(refusal(() => create(svc("n", { type: "NodePort", clusterIP: "None" }))).message).toContain("may not be set to 'None' for NodePort services");
  expect(ipOf(create(svc("x", { type: "ExternalName", externalName: "example.test" })))).toBeUndefined();
  expect(ipOf(create(svc("next")))).toBe("10.96.7.1");
});

it("keeps the address through an update that leaves it out, and refuses one that changes it", () => {
  const { ips, create } = allocator();
  const made = create(svc("a"));
  expect(ipOf(ips.keep(made, svc("a", { ports: [{ port: 81 }] })))).toBe("10.96.7.1");
  expect(refusal(() => ips.keep(made, svc("a", { clusterIP: "10.96.7.2" })))).toMatchObject({
    code: 422, field: "spec.clusterIP", message: 'Service "a" is invalid: spec.clusterIP: Invalid value: "10.96.7.2": field is immutable',
  });
  // From ExternalName to ClusterIP it gets one, and back it gives it up.
  const external = create(svc("x", { type: "ExternalName" }));
  const now = ips.keep(external, svc("x"));
  expect(ipOf(now)).toBe("10.96.7.2");
  expect(ipOf(ips.keep(now, svc("x", { type: "ExternalName" })))).toBeUndefined();
});

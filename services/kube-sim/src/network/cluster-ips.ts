// Services' ClusterIPs, as the API server's allocator hands them out: one free address of
// the service range per Service (the next free one; the client's own kept when it is valid,
// in range and free), `None` for a headless Service, none for ExternalName, and immutable
// once set. What is allocated is read off the stored Services, so there is no state to lose.
import { typeOf } from "../resources.js";
import { ApiError, invalidObject, type FieldError } from "../status.js";
import type { Obj } from "../store.js";
import { contains, ipToNumber, numberToIp, type Cidr } from "./cidr.js";

type Rec = Record<string, unknown>;

export const HEADLESS = "None";

const specOf = (svc: Obj) => ({ ...((svc["spec"] ?? {}) as Rec) });
const given = (spec: Rec): string | undefined => (spec["clusterIP"] as string | undefined) || ((spec["clusterIPs"] ?? []) as string[])[0] || undefined;

export class ClusterIPs {
  constructor(readonly range: Cidr, private readonly services: () => Obj[]) {}

  /** A Service being created, with its ClusterIP chosen; a 422 naming `spec.clusterIPs[0]` when the one asked for cannot be had. */
  assign(svc: Obj): Obj {
    const spec = specOf(svc);
    const type = String(spec["type"] ?? "ClusterIP");
    if (type === "ExternalName") return svc;
    const asked = given(spec);
    const refuse = (value: string, detail: string) => invalidObject(typeOf("services"), svc.metadata.name, [{ type: "Invalid", field: "spec.clusterIPs[0]", value, detail }]);
    let ip: string;
    if (asked === HEADLESS) {
      if (type !== "ClusterIP") throw refuse(asked, `may not be set to 'None' for ${type} services`);
      ip = HEADLESS;
    } else if (asked !== undefined) {
      const n = ipToNumber(asked);
      if (n === undefined) throw refuse(asked, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
      if (!contains(this.range, n)) throw refuse(asked, `failed to allocate IP ${asked}: the provided IP (${asked}) is not in the valid range. The range of valid IPs is ${this.range.text}`);
      if (this.taken().has(asked)) throw refuse(asked, `failed to allocate IP ${asked}: provided IP is already allocated`);
      ip = asked;
    } else {
      ip = this.next();
    }
    return { ...svc, spec: { ...spec, clusterIP: ip, clusterIPs: [ip], ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack", internalTrafficPolicy: spec["internalTrafficPolicy"] ?? "Cluster" } };
  }

  /** A Service being updated keeps its ClusterIP (an update that leaves it out keeps it too); changing it is a 422. */
  keep(current: Obj, next: Obj): Obj {
    const before = specOf(current);
    const spec = specOf(next);
    const wasSet = before["clusterIP"] !== undefined;
    if (String(spec["type"] ?? "ClusterIP") === "ExternalName") {
      delete spec["clusterIP"];
      delete spec["clusterIPs"];
      return { ...next, spec };
    }
    if (!wasSet) return this.assign(next);
    const asked = given(spec);
    if (asked !== undefined && asked !== before["clusterIP"]) {
      const errors: FieldError[] = [{ type: "Invalid", field: "spec.clusterIP", value: asked, detail: "field is immutable" }];
      throw invalidObject(typeOf("services"), next.metadata.name, errors);
    }
    return { ...next, spec: { ...spec, clusterIP: before["clusterIP"], clusterIPs: before["clusterIPs"] ?? [before["clusterIP"]] } };
  }

  private taken(): Set<string> {
    return new Set(this.services().flatMap((s) => ((specOf(s)["clusterIPs"] ?? []) as string[])));
  }

  /** The lowest free address, past the network address and before the broadcast one. */
  private next(): string {
    const taken = this.taken();
    for (let n = this.range.base + 1; n < this.range.base + this.range.size - 1; n++) {
      const ip = numberToIp(n);
      if (!taken.has(ip)) return ip;
    }
    throw new ApiError(500, "InternalError", `Internal error occurred: failed to allocate a serviceIP: range is full (${this.range.text})`);
  }
}

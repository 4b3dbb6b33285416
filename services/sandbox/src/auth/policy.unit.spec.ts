// Every RPC of every service in api.proto has an access rule, and no rule names a method
// that is not there: adding an RPC without deciding who may call it fails here.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createLogger } from "@ephemera/kit";
import { API_POLICY, methodKey, needed } from "./policy.js";
import { guard } from "./guard.js";
import { apiServices } from "../api.js";
import type { ApiAccess } from "./access.js";
import type { SandboxCore } from "../service.js";

const API_PROTO = join(__dirname, "..", "..", "..", "..", "proto", "ephemera", "v1", "api.proto");

/** `Service/Method` of every rpc in api.proto, read from the source. */
function protoMethods(): string[] {
  const text = readFileSync(API_PROTO, "utf8").replace(/\/\/.*$/gm, "");
  const methods: string[] = [];
  for (const service of text.matchAll(/service\s+(\w+)\s*\{([^}]*)\}/g)) {
    for (const rpc of service[2]!.matchAll(/rpc\s+(\w+)\s*\(/g)) methods.push(`${service[1]}/${rpc[1]}`);
  }
  return methods;
}

const access: ApiAccess = { describe: "test", authenticate: () => Promise.reject(new Error("not called")) };
const logger = createLogger("test", "silent");

describe("the API's access policy", () => {
  it("has a rule for every rpc of api.proto, and none for a method that is not there", () => {
    const methods = protoMethods();
    expect(methods.length).toBeGreaterThanOrEqual(12);
    expect(methods.filter((m) => !(m in API_POLICY))).toEqual([]);
    expect(Object.keys(API_POLICY).filter((m) => !methods.includes(m))).toEqual([]);
  });

  it("guards every method the API serves; a method without a rule stops the API from starting", () => {
    const bindings = apiServices({} as SandboxCore, logger);
    const served = bindings.flatMap((b) => Object.values(b.definition).map((m) => methodKey(m.path)));
    expect(served.sort()).toEqual(protoMethods().sort());
    expect(() => guard(bindings, access, logger)).not.toThrow();
    const { ["SandboxService/Retry"]: _, ...withoutRetry } = API_POLICY;
    expect(() => guard(bindings, access, logger, withoutRetry))
      .toThrow("the API has no access rule for SandboxService/Retry: add one to API_POLICY (services/sandbox/src/auth/policy.ts)");
  });

  it("lets viewers read, editors change sandboxes and publish, admins delete plugins and force deletes", () => {
    const role = (method: string, request: object = {}) => needed(API_POLICY[method]!, request).role;
    expect(["ResourcePluginService/Get", "ResourcePluginService/List", "SandboxService/Get", "SandboxService/List",
      "SandboxService/Watch", "LogService/Get", "EventService/Watch"].map((m) => role(m))).toEqual(Array(7).fill("viewer"));
    expect(["ResourcePluginService/Apply", "SandboxService/Apply", "SandboxService/Delete", "SandboxService/Retry", "LocalService/Serve"]
      .map((m) => role(m))).toEqual(Array(5).fill("editor"));
    expect(role("ResourcePluginService/Delete")).toBe("admin");
    expect(role("SandboxService/Delete", { name: "a", force: true })).toBe("admin");
    expect(role("SandboxService/Get", { name: "a", showOutputs: true })).toBe("editor");
    expect(role("SandboxService/Watch", { name: "a", showOutputs: true })).toBe("editor");
    expect(needed(API_POLICY["SandboxService/Delete"]!, { force: true }).what).toBe("with force");
  });
});

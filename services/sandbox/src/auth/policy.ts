// Which role each method of the public API needs: viewers read, editors change sandboxes and
// publish plugins, admins do what cannot be undone for others. docs/security.md has the same table.
import type * as pb from "@ephemera/proto";
import type { Role } from "./roles.js";

export interface MethodRule {
  role: Role;
  /** Some requests of the method need more: those `when` says, described by `what`. */
  raise?: { role: Role; what: string; when: (request: unknown) => boolean };
}

const raise = <Req>(role: Role, what: string, when: (request: Req) => boolean): MethodRule["raise"] =>
  ({ role, what, when: (request) => when(request as Req) });

// Output values are secrets (a database's password): reading them is an editor's.
const showOutputs = raise<pb.GetSandboxRequest>("editor", "with show_outputs", (r) => r.showOutputs);

/** Keyed `<Service>/<Method>` as in api.proto. A method without a rule stops the guarded API from starting. */
export const API_POLICY: Readonly<Record<string, MethodRule>> = {
  "ResourcePluginService/Apply": { role: "editor" },
  "ResourcePluginService/Get": { role: "viewer" },
  "ResourcePluginService/List": { role: "viewer" },
  // The registry is shared: a deleted version is gone for every team's next sandbox.
  "ResourcePluginService/Delete": { role: "admin" },
  "SandboxService/Apply": { role: "editor" },
  "SandboxService/Get": { role: "viewer", raise: showOutputs },
  "SandboxService/List": { role: "viewer" },
  // Forced, a sandbox goes without its delete workflows: whatever its resources made is left behind.
  "SandboxService/Delete": { role: "editor", raise: raise<pb.DeleteSandboxRequest>("admin", "with force", (r) => r.force) },
  "SandboxService/Retry": { role: "editor" },
  "SandboxService/Watch": { role: "viewer", raise: showOutputs },
  // A route group routes the traffic of sandboxes by their labels: an editor's, like the sandboxes.
  "RouteGroupService/Apply": { role: "editor" },
  "RouteGroupService/Get": { role: "viewer" },
  "RouteGroupService/List": { role: "viewer" },
  "RouteGroupService/Delete": { role: "editor" },
  // A job runner group decides the image, user and permissions jobs run with: an admin's.
  "JobRunnerGroupService/Apply": { role: "admin" },
  "JobRunnerGroupService/Get": { role: "viewer" },
  "JobRunnerGroupService/List": { role: "viewer" },
  "JobRunnerGroupService/Delete": { role: "admin" },
  // A job runs in a group an admin made, in a sandbox's routing context: an editor's, like the sandbox.
  "JobService/Submit": { role: "editor" },
  "JobService/Get": { role: "viewer" },
  "JobService/List": { role: "viewer" },
  "JobService/Delete": { role: "editor" },
  "JobService/Logs": { role: "viewer" },
  "ArtifactService/Download": { role: "viewer" },
  // Serving a sandbox's local workload receives its traffic on a workstation: an editor's, like the sandbox.
  "LocalService/Serve": { role: "editor" },
  "LogService/Get": { role: "viewer" },
  "EventService/Watch": { role: "viewer" },
  // Anyone with a valid token may ask who it stands for.
  "AccessService/WhoAmI": { role: "viewer" },
};

/**
 * The Routes API (routes.proto): the rules say every sandbox's routing key and where its
 * traffic goes, so reading them is a viewer's, like reading the sandboxes.
 */
export const ROUTES_POLICY: Readonly<Record<string, MethodRule>> = {
  "Routes/GetWorkloadRoutingRules": { role: "viewer" },
  "Routes/WatchWorkloadRoutingRules": { role: "viewer" },
  "Routes/GetClusterServices": { role: "viewer" },
};

/** `/ephemera.v1.SandboxService/Apply` → `SandboxService/Apply`. */
export const methodKey = (path: string): string => path.slice(path.lastIndexOf(".") + 1);

/** The role this request needs, and why when it is more than the method's own. */
export function needed(rule: MethodRule, request: unknown): { role: Role; what?: string } {
  return rule.raise?.when(request) ? { role: rule.raise.role, what: rule.raise.what } : { role: rule.role };
}

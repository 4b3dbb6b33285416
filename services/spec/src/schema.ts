// JSON Schemas of the plugin and sandbox files, for editors (yaml-language-server and the
// like): generated from the same zod schemas the validator uses. The rules that span
// fields (references, cycles, uniqueness) are the validator's alone.
import * as z from "zod";
import { PluginDoc, SandboxDoc } from "./model.js";
import { RouteGroupDoc } from "./routegroup.js";

export function jsonSchema(kind: "plugin" | "sandbox" | "routegroup"): object {
  const schema = z.toJSONSchema(kind === "plugin" ? PluginDoc : kind === "sandbox" ? SandboxDoc : RouteGroupDoc, {
    target: "draft-7",
    // Describe what authors write: params given as numbers or booleans are accepted.
    io: "input",
  });
  return schema;
}

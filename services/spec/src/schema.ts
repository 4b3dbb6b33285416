// JSON Schemas of the plugin, sandbox, route group, job runner group and job files, for
// editors (yaml-language-server and the like): generated from the same zod schemas the validator uses. The rules that span
// fields (references, cycles, uniqueness) are the validator's alone.
import * as z from "zod";
import { PluginDoc, SandboxDoc } from "./model.js";
import { RouteGroupDoc } from "./routegroup.js";
import { JobDoc, JobRunnerGroupDoc } from "./jobs.js";

export const SCHEMA_KINDS = ["plugin", "sandbox", "routegroup", "jobrunnergroup", "job"] as const;
export type SchemaKind = (typeof SCHEMA_KINDS)[number];
const DOCS = { plugin: PluginDoc, sandbox: SandboxDoc, routegroup: RouteGroupDoc, jobrunnergroup: JobRunnerGroupDoc, job: JobDoc } as const;

export function jsonSchema(kind: SchemaKind): object {
  const schema = z.toJSONSchema(DOCS[kind], {
    target: "draft-7",
    // Describe what authors write: params given as numbers or booleans are accepted.
    io: "input",
  });
  return schema;
}

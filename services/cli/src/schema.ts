// `eph schema plugin|sandbox|routegroup|jobrunnergroup|job`: the JSON Schema of a file, for editors.
import { Argument, type Command } from "commander";
import type { SchemaKind } from "@ephemera/spec";
import type { Context } from "./context.js";
import { loadSpec } from "./files.js";

/** Listed here, not read from @ephemera/spec, which is loaded only when a command needs it. */
const KINDS: readonly SchemaKind[] = ["plugin", "sandbox", "routegroup", "jobrunnergroup", "job"];

export function registerSchema(program: Command, ctx: Context): void {
  program
    .command("schema")
    .description("print the JSON Schema of a plugin, sandbox, route group, job runner group or job file")
    .addArgument(new Argument("<kind>", "which file").choices(KINDS))
    .action(async (kind: SchemaKind) => {
      const { jsonSchema } = await loadSpec();
      ctx.out(`${JSON.stringify(jsonSchema(kind), null, 2)}\n`);
    });
}

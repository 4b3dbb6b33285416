// `eph schema plugin|sandbox|routegroup`: the JSON Schema of a file, for editors.
import { Argument, type Command } from "commander";
import type { Context } from "./context.js";
import { loadSpec } from "./files.js";

export function registerSchema(program: Command, ctx: Context): void {
  program
    .command("schema")
    .description("print the JSON Schema of a plugin, sandbox or route group file")
    .addArgument(new Argument("<kind>", "which file").choices(["plugin", "sandbox", "routegroup"]))
    .action(async (kind: "plugin" | "sandbox" | "routegroup") => {
      const { jsonSchema } = await loadSpec();
      ctx.out(`${JSON.stringify(jsonSchema(kind), null, 2)}\n`);
    });
}

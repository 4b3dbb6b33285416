// `eph schema plugin|sandbox`: the JSON Schema of a file, for editors.
import { Argument, type Command } from "commander";
import type { Context } from "./context.js";
import { loadSpec } from "./files.js";

export function registerSchema(program: Command, ctx: Context): void {
  program
    .command("schema")
    .description("print the JSON Schema of a plugin or sandbox file")
    .addArgument(new Argument("<kind>", "which file").choices(["plugin", "sandbox"]))
    .action(async (kind: "plugin" | "sandbox") => {
      const { jsonSchema } = await loadSpec();
      ctx.out(`${JSON.stringify(jsonSchema(kind), null, 2)}\n`);
    });
}

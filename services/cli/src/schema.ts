// `eph schema plugin|sandbox`: the JSON Schema of a file, for editors.
import { Argument, type Command } from "commander";
import { jsonSchema } from "@ephemera/spec";
import type { Context } from "./context.js";

export function registerSchema(program: Command, ctx: Context): void {
  program
    .command("schema")
    .description("print the JSON Schema of a plugin or sandbox file")
    .addArgument(new Argument("<kind>", "which file").choices(["plugin", "sandbox"]))
    .action((kind: "plugin" | "sandbox") => {
      ctx.out(`${JSON.stringify(jsonSchema(kind), null, 2)}\n`);
    });
}

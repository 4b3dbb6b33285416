// The `eph` program: the command tree, and the one place errors become exit codes
// (0 done, 1 the operation failed, 2 bad usage or an invalid file).
import { Command, CommanderError } from "commander";
import { UnavailableError, ValidationError, errorMessage } from "@ephemera/kit";
import { TemplateError } from "@ephemera/spec";
import { DEFAULT_API } from "./api.js";
import { Context, type Io } from "./context.js";
import { UsageError } from "./errors.js";
import { registerEvents } from "./events.js";
import { registerLogs } from "./logs.js";
import { registerPlugin } from "./plugin.js";
import { registerSandbox } from "./sandbox.js";
import { registerSchema } from "./schema.js";

export type { Io, Writer } from "./context.js";

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** Runs `eph` with these arguments (without the program name) and returns the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  const ctx = new Context(io);
  try {
    await buildProgram(ctx).parseAsync(argv, { from: "user" });
    return EXIT_OK;
  } catch (err) {
    return report(err, ctx);
  } finally {
    ctx.close();
  }
}

function buildProgram(ctx: Context): Command {
  const program = new Command("eph")
    .description("ephemera: ephemeral resources for sandboxes")
    .option("--api <address>", `API address (default: $EPHEMERA_API or ${DEFAULT_API})`)
    .configureOutput({
      writeOut: (s) => void ctx.io.stdout.write(s),
      writeErr: (s) => void ctx.io.stderr.write(s),
    })
    .exitOverride()
    .showHelpAfterError("(add --help for usage)")
    .addHelpText(
      "after",
      `
Exit codes: 0 success, 1 the operation failed, 2 bad usage or an invalid file.
With -o json, stdout holds exactly one JSON document (one per line for events);
progress and diagnostics go to stderr.`,
    )
    .hook("preAction", (_program, action) => {
      const api = action.optsWithGlobals<{ api?: string }>().api;
      if (api) ctx.address = api;
    });
  registerPlugin(program, ctx);
  registerSandbox(program, ctx);
  registerLogs(program, ctx);
  registerEvents(program, ctx);
  registerSchema(program, ctx);
  return program;
}

function report(err: unknown, ctx: Context): number {
  // Commander has already printed its own message (or the help).
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  if (err instanceof ValidationError || err instanceof TemplateError || err instanceof UsageError) {
    ctx.err(`error: ${err.message}`);
    return EXIT_USAGE;
  }
  if (err instanceof UnavailableError) {
    // grpc-js appends an empty "Resolution note:" to connection failures.
    const why = err.message.replace(/\s*Resolution note:\s*$/, "");
    ctx.err(`error: the ephemera API at ${ctx.address} is unavailable: ${why}`);
    return EXIT_FAILED;
  }
  // A failed operation, a conflict, something not found: the message says which.
  ctx.err(`error: ${errorMessage(err)}`);
  return EXIT_FAILED;
}

// The `eph` program: the command tree, and the one place errors become exit codes
// (0 done, 1 the operation failed, 2 bad usage or an invalid file, 3 not authenticated,
// 4 permission denied; `sandbox get-status` answers with its own, status.ts).
import { Command, CommanderError } from "commander";
import { PermissionDeniedError, UnauthenticatedError, UnavailableError, ValidationError, errorMessage } from "@ephemera/kit/errors";
import { Context, DEFAULT_API, type ConnectionOptions, type Io } from "./context.js";
import {
  EXIT_FAILED, EXIT_OK, EXIT_PERMISSION_DENIED, EXIT_UNAUTHENTICATED, EXIT_USAGE, UsageError,
} from "./errors.js";
import { registerEvents } from "./events.js";
import { isTemplateError } from "./files.js";
import { registerLogs } from "./logs.js";
import { registerLocal } from "./workstation/commands.js";
import { registerPlugin } from "./plugin.js";
import { registerRouteGroup } from "./routegroup.js";
import { registerJobRunnerGroup } from "./jobrunnergroup.js";
import { registerJob } from "./job.js";
import { registerArtifact } from "./artifact.js";
import { registerSandbox } from "./sandbox.js";
import { readableArgs } from "./options.js";
import { registerSchema } from "./schema.js";
import { statusErrorExit } from "./status.js";

export type { Io, Writer } from "./context.js";

export { EXIT_FAILED, EXIT_OK, EXIT_PERMISSION_DENIED, EXIT_UNAUTHENTICATED, EXIT_USAGE } from "./errors.js";

/** Runs `eph` with these arguments (without the program name) and returns the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  const ctx = new Context(io);
  try {
    await buildProgram(ctx).parseAsync(readableArgs(argv), { from: "user" });
    return ctx.exitCode;
  } catch (err) {
    const code = report(err, ctx);
    return ctx.answering ? statusErrorExit(code) : code;
  } finally {
    ctx.close();
  }
}

function buildProgram(ctx: Context): Command {
  const program = new Command("eph")
    .description("ephemera: ephemeral resources for sandboxes")
    .option("--api <address>", `API address (default: $EPHEMERA_API or ${DEFAULT_API})`)
    .option("--token <token>", "bearer token for the API (default: $EPHEMERA_TOKEN, which keeps it out of the process list)")
    .option("--tls", "connect over TLS, trusting the system's CAs ($EPHEMERA_TLS=true)")
    .option("--tls-ca <file>", "connect over TLS, trusting this CA's PEM certificate ($EPHEMERA_TLS_CA)")
    .option("--tls-server-name <name>", "name expected on the API's certificate, when not the address's host ($EPHEMERA_TLS_SERVER_NAME)")
    .option("--tls-cert <file>", "client certificate (PEM) for an API that asks for one ($EPHEMERA_TLS_CLIENT_CERT)")
    .option("--tls-key <file>", "the client certificate's key (PEM) ($EPHEMERA_TLS_CLIENT_KEY)")
    .configureOutput({
      writeOut: (s) => void ctx.io.stdout.write(s),
      writeErr: (s) => void ctx.io.stderr.write(s),
    })
    .exitOverride()
    .showHelpAfterError("(add --help for usage)")
    .addHelpText(
      "after",
      `
Exit codes: 0 success, 1 the operation failed, 2 bad usage or an invalid file,
3 not authenticated (no token, or one the API does not accept), 4 permission denied (the
token's role does not allow it). sandbox get-status answers with its own: 0 ready,
1 failed, 2 not found, 3 pending; 4 the API refused the call (not authenticated or
permission denied), 5 it could not tell (bad usage, the API out of reach, …). So does
local status: 0 connected, 1 not connected, 2 reconnecting (or still connecting); 5 it
could not tell.
With -o json, stdout holds exactly one JSON document (one per line for events and logs);
progress and diagnostics go to stderr.`,
    )
    .hook("preAction", (_program, action) => {
      ctx.connect(action.optsWithGlobals<ConnectionOptions>());
    });
  registerPlugin(program, ctx);
  registerSandbox(program, ctx);
  registerRouteGroup(program, ctx);
  registerJobRunnerGroup(program, ctx);
  registerJob(program, ctx);
  registerArtifact(program, ctx);
  registerLogs(program, ctx);
  registerEvents(program, ctx);
  registerLocal(program, ctx, async () => (await import("./workstation/open.js")).openTunnel);
  registerSchema(program, ctx);
  return program;
}

function report(err: unknown, ctx: Context): number {
  // Commander has already printed its own message (or the help).
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  if (err instanceof ValidationError || isTemplateError(err) || err instanceof UsageError) {
    ctx.err(`error: ${err.message}`);
    return EXIT_USAGE;
  }
  if (err instanceof UnauthenticatedError) {
    const hint = ctx.token ? "" : " (set EPHEMERA_TOKEN or --token)";
    ctx.err(`error: the ephemera API at ${ctx.address} did not accept the call: ${err.message}${hint}`);
    return EXIT_UNAUTHENTICATED;
  }
  if (err instanceof PermissionDeniedError) {
    ctx.err(`error: permission denied: ${err.message}`);
    return EXIT_PERMISSION_DENIED;
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

// `eph logs`: the log of each step of one resource, streamed to stdout as it arrives.
import { Option, type Command } from "commander";
import type { Context } from "./context.js";
import { UsageError } from "./errors.js";


/** Reading a resource's logs is a bounded read; the deadline only guards against a stuck stream. */
const LOGS_DEADLINE_MS = 60_000;

interface LogsOpts { sandbox: string; resource: string; step?: string; phase?: string; attempt?: string }

export function registerLogs(program: Command, ctx: Context): void {
  program
    .command("logs")
    .description("print the logs of a resource's steps (every step in workflow order, or one)")
    .requiredOption("--sandbox <name>", "sandbox name")
    .requiredOption("--resource <name>", "resource name in the sandbox")
    .option("--step <name>", "only this step")
    .addOption(new Option("--phase <phase>", "only this workflow").choices(["create", "delete"]))
    .option("--attempt <n>", "this attempt of each step (default: the latest)")
    .action(async (opts: LogsOpts) => {
      const attempt = opts.attempt === undefined ? 0 : Number(opts.attempt);
      if (!Number.isInteger(attempt) || (opts.attempt !== undefined && attempt < 1)) {
        throw new UsageError(`--attempt must be a positive whole number, not "${opts.attempt}"`);
      }
      let current = "";
      await ctx.api().streamLogs(
        { sandbox: opts.sandbox, resource: opts.resource, step: opts.step ?? "", phase: opts.phase ?? "", attempt },
        (chunk) => {
          // Headers go to stderr so stdout stays exactly the log.
          const header = `${chunk.step} (${chunk.phase}${chunk.attempt > 1 ? `, attempt ${chunk.attempt}` : ""})`;
          if (!opts.step && header !== current) ctx.err(`==> ${header} <==`);
          current = header;
          ctx.out(chunk.data);
        },
        { deadline: Date.now() + LOGS_DEADLINE_MS, signal: ctx.io.signal },
      );
    });
}

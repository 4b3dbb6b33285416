// `eph logs`: the log of each step of one resource, streamed to stdout as it arrives.
import { Option, type Command } from "commander";
import type { Context } from "./context.js";

/** Reading a resource's logs is a bounded read; the deadline only guards against a stuck stream. */
const LOGS_DEADLINE_MS = 60_000;

interface LogsOpts { sandbox: string; resource: string; step?: string; phase?: string }

export function registerLogs(program: Command, ctx: Context): void {
  program
    .command("logs")
    .description("print the logs of a resource's steps (every step in workflow order, or one)")
    .requiredOption("--sandbox <name>", "sandbox name")
    .requiredOption("--resource <name>", "resource name in the sandbox")
    .option("--step <name>", "only this step")
    .addOption(new Option("--phase <phase>", "only this workflow").choices(["create", "delete"]))
    .action(async (opts: LogsOpts) => {
      let current = "";
      await ctx.api().streamLogs(
        { sandbox: opts.sandbox, resource: opts.resource, step: opts.step ?? "", phase: opts.phase ?? "" },
        (chunk) => {
          // Headers go to stderr so stdout stays exactly the log.
          const header = `${chunk.step} (${chunk.phase})`;
          if (!opts.step && header !== current) ctx.err(`==> ${header} <==`);
          current = header;
          ctx.out(chunk.data);
        },
        { deadline: Date.now() + LOGS_DEADLINE_MS, signal: ctx.io.signal },
      );
    });
}

// `eph logs`: the log of each step of one resource, streamed to stdout as it arrives; with
// --follow, as the steps write it, until they have ended.
import { Option, type Command } from "commander";
import { UnavailableError } from "@ephemera/kit/errors";
import type * as pb from "@ephemera/proto";
import type { Context } from "./context.js";
import { MAX_DURATION_MS } from "@ephemera/spec/names";
import { durationFlag } from "./duration.js";
import { UsageError } from "./errors.js";

/** Reading a resource's logs is a bounded read; the deadline only guards against a stuck stream. */
const LOGS_DEADLINE_MS = 60_000;
/** A follow ends with the steps, or at the server's bound (6 h); this only guards against a lost server. */
const FOLLOW_DEADLINE_MS = 6 * 3_600_000 + 5 * 60_000;

interface LogsOpts {
  sandbox: string; resource: string; step?: string; phase?: string; attempt?: string;
  follow?: boolean; since?: string; output?: "json";
}

export function registerLogs(program: Command, ctx: Context): void {
  program
    .command("logs")
    .description("print the logs of a resource's steps (every step in workflow order, or one), as far as written")
    .requiredOption("--sandbox <name>", "sandbox name")
    .requiredOption("--resource <name>", "resource name in the sandbox")
    .option("--step <name>", "only this step")
    .addOption(new Option("--phase <phase>", "only this workflow").choices(["create", "delete"]))
    .option("--attempt <n>", "this attempt of each step (default: the latest)")
    .option("--follow", "print lines as the steps write them; exit once they have ended")
    .option("--since <duration>", "only what was written in the last DURATION (e.g. 90s, 10m, 1h30m, 2d, 1w; at most 365 days)")
    .addOption(new Option("-o, --output <format>", "one JSON object per line of log").choices(["json"]))
    .action(async (opts: LogsOpts) => {
      const attempt = opts.attempt === undefined ? 0 : Number(opts.attempt);
      if (!Number.isInteger(attempt) || (opts.attempt !== undefined && attempt < 1)) {
        throw new UsageError(`--attempt must be a positive whole number, not "${opts.attempt}"`);
      }
      const sinceMs = opts.since === undefined ? 0 : durationFlag("--since", opts.since, MAX_DURATION_MS.logsSince);
      const print = opts.output === "json" ? jsonLines(ctx, opts) : text(ctx, opts);
      const request: pb.GetLogsRequest = {
        sandbox: opts.sandbox, resource: opts.resource, step: opts.step ?? "", phase: opts.phase ?? "", attempt,
        follow: opts.follow ?? false, sinceMs,
      };
      try {
        await (await ctx.api()).streamLogs(request, print.chunk, {
          deadline: Date.now() + (opts.follow ? FOLLOW_DEADLINE_MS : LOGS_DEADLINE_MS), signal: ctx.io.signal,
        });
      } catch (err) {
        // The server's bound on a follow is not the API being away.
        const cause = err instanceof UnavailableError ? (err.cause as { code?: number } | undefined) : undefined;
        const { grpc } = await import("@ephemera/kit/client"); // loaded with the API already
        if (opts.follow && cause?.code === grpc.status.DEADLINE_EXCEEDED) throw new Error((err as Error).message, { cause: err });
        throw err;
      } finally {
        print.end();
      }
    });
}

interface Printer {
  chunk(chunk: pb.LogChunk): void;
  end(): void;
}

/** The log bytes as written, on stdout; a header per step run on stderr (with --step, from the second run on). */
function text(ctx: Context, opts: LogsOpts): Printer {
  let current = "";
  return {
    chunk: (chunk) => {
      const header = `${chunk.step} (${chunk.phase}${chunk.attempt > 1 ? `, attempt ${chunk.attempt}` : ""})`;
      // With --step, a header only when a second attempt follows the first.
      if (header !== current && (!opts.step || current !== "")) ctx.err(`==> ${header} <==`);
      current = header;
      if (chunk.data.length) ctx.out(chunk.data);
    },
    end: () => undefined,
  };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * One JSON object per line of log: `{step, phase, attempt, runId, time, line}`, or `base64`
 * instead of `line` when the line is not UTF-8. A line split across chunks is printed once
 * whole, with the time of the chunk that completed it.
 */
function jsonLines(ctx: Context, opts: LogsOpts): Printer {
  let run: pb.LogChunk | undefined;
  let partial = Buffer.alloc(0);
  let partialTime = "";
  const emit = (bytes: Buffer, time: string) => {
    let line: { line: string } | { base64: string };
    try {
      line = { line: utf8.decode(bytes) };
    } catch {
      line = { base64: bytes.toString("base64") };
    }
    ctx.out(`${JSON.stringify({
      sandbox: opts.sandbox, resource: opts.resource, step: run!.step, phase: run!.phase, attempt: run!.attempt, runId: run!.runId, time, ...line,
    })}\n`);
  };
  const flush = () => {
    if (run && partial.length) emit(partial, partialTime);
    partial = Buffer.alloc(0);
  };
  return {
    chunk: (chunk) => {
      if (chunk.runId !== run?.runId) {
        flush();
        run = chunk;
      }
      if (!chunk.data.length) return;
      let data = Buffer.concat([partial, chunk.data]);
      partialTime = chunk.time;
      for (let nl = data.indexOf(0x0a); nl >= 0; nl = data.indexOf(0x0a)) {
        emit(data.subarray(0, nl), chunk.time);
        data = data.subarray(nl + 1);
      }
      partial = Buffer.from(data);
    },
    end: flush,
  };
}

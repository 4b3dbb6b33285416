// `eph events`: the event stream (output values redacted by the server), past and, with
// --follow, to come. It starts after a position (--after), or a time ago (--since), or,
// given neither, an hour ago: the server reads from there, never the whole stream.
import { Option, type Command } from "commander";
import type * as pb from "@ephemera/proto";
import { MAX_DURATION_MS } from "@ephemera/spec/names";
import type { Context } from "./context.js";
import { durationFlag } from "./duration.js";
import { UsageError } from "./errors.js";

/** Without --follow the server replays and ends; this only guards against a stuck server. */
const REPLAY_DEADLINE_MS = 2 * 60_000;

interface EventsOpts { follow?: boolean; sandbox?: string; type?: string; since?: string; after?: string; output?: "json" }

export function registerEvents(program: Command, ctx: Context): void {
  program
    .command("events")
    .description("print events, one per line")
    .option("--follow", "keep printing new events until interrupted")
    .option("--sandbox <name>", "only the events of this sandbox and its resources")
    .option("--type <glob>", "only event types matching this glob (e.g. 'ephemera.sandbox.*')")
    .option("--since <duration>", "only the events of the last DURATION (e.g. 90s, 10m, 1h30m, 2d; default 1h)")
    .option("--after <position>", "only the events after this stream position (a JSON event's `position`; 0: from the beginning)")
    .addOption(new Option("-o, --output <format>", "one JSON envelope per line").choices(["json"]))
    .action(async (opts: EventsOpts) => {
      await (await ctx.api()).watchEvents(
        { follow: opts.follow ?? false, sandbox: opts.sandbox ?? "", typeGlob: opts.type ?? "", ...eventsStart(opts) },
        (record) => ctx.out(`${opts.output === "json" ? jsonLine(record) : summaryLine(record)}\n`),
        { deadline: opts.follow ? undefined : Date.now() + REPLAY_DEADLINE_MS, signal: ctx.io.signal },
      );
    });
}

/** Where the watch starts: --after or --since (one of them), else the server's default (the last hour). */
export function eventsStart(opts: Pick<EventsOpts, "since" | "after">): Pick<pb.WatchEventsRequest, "afterPosition" | "sinceMs"> {
  if (opts.since !== undefined && opts.after !== undefined) throw new UsageError("--since and --after: give one of them, not both");
  if (opts.after !== undefined) {
    if (!/^\d+$/.test(opts.after)) throw new UsageError(`--after: "${opts.after}" is not a stream position (a whole number, 0 or more)`);
    return { afterPosition: Number(opts.after), sinceMs: 0 };
  }
  return { sinceMs: opts.since === undefined ? 0 : durationFlag("--since", opts.since, MAX_DURATION_MS.logsSince) };
}

function parse(record: pb.EventRecord): Record<string, unknown> | undefined {
  try {
    const doc: unknown = JSON.parse(record.json);
    return doc && typeof doc === "object" ? (doc as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Exactly one line, whatever whitespace the server used. */
function jsonLine(record: pb.EventRecord): string {
  const doc = parse(record);
  return doc ? JSON.stringify(doc) : JSON.stringify({ raw: record.json });
}

/** `time type subject`, for people. */
export function summaryLine(record: pb.EventRecord): string {
  const doc = parse(record);
  if (!doc) return record.json.replace(/\s+/g, " ");
  return [doc["time"], doc["type"], doc["subject"]].map((v) => String(v ?? "-")).join("  ");
}

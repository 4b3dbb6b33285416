// `eph events`: the event stream (output values redacted by the server), past and, with
// --follow, to come.
import { Option, type Command } from "commander";
import type * as pb from "@ephemera/proto";
import type { Context } from "./context.js";

/** Without --follow the server replays and ends; this only guards against a stuck server. */
const REPLAY_DEADLINE_MS = 2 * 60_000;

interface EventsOpts { follow?: boolean; sandbox?: string; type?: string; output?: "json" }

export function registerEvents(program: Command, ctx: Context): void {
  program
    .command("events")
    .description("print events, one per line")
    .option("--follow", "keep printing new events until interrupted")
    .option("--sandbox <name>", "only the events of this sandbox and its resources")
    .option("--type <glob>", "only event types matching this glob (e.g. 'ephemera.sandbox.*')")
    .addOption(new Option("-o, --output <format>", "one JSON envelope per line").choices(["json"]))
    .action(async (opts: EventsOpts) => {
      await (await ctx.api()).watchEvents(
        { follow: opts.follow ?? false, sandbox: opts.sandbox ?? "", typeGlob: opts.type ?? "" },
        (record) => ctx.out(`${opts.output === "json" ? jsonLine(record) : summaryLine(record)}\n`),
        { deadline: opts.follow ? undefined : Date.now() + REPLAY_DEADLINE_MS, signal: ctx.io.signal },
      );
    });
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

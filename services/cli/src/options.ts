// Options several commands share, declared once so they read and behave the same everywhere.
import { Option, type Command } from "commander";
import { MAX_DURATION_MS } from "@ephemera/spec/names";
import { durationFlag } from "./duration.js";
import { UsageError } from "./errors.js";
import type { OutputFormat } from "./render.js";

export function fileOptions(cmd: Command, what: string): Command {
  return cmd
    .option("-f, --file <file>", `${what} file ("-" reads standard input)`)
    .option("--set <var=value>", "value of an @{var} in the file (repeatable)", (v: string, all: string[]) => [...all, v], []);
}

export function outputOption(cmd: Command, formats: OutputFormat[] = ["json", "yaml"]): Command {
  return cmd.addOption(new Option("-o, --output <format>", "output format").choices(formats));
}

export function waitOptions(cmd: Command, what: string, defaultTimeout: string): Command {
  return cmd
    .option("--wait", `wait until the sandbox is ${what}`)
    .option("--wait-timeout <duration>", "how long --wait waits (e.g. 90s, 3m, 1h30m, 2d, 1w; at most 365 days)", defaultTimeout);
}

export function timeoutMs(text: string): number {
  return durationFlag("--wait-timeout", text, MAX_DURATION_MS.wait);
}

/** NAME or `-f FILE`, exactly one of them. */
export function nameOrFile(name: string | undefined, file: string | undefined, what: string): void {
  if (name && file) throw new UsageError(`give either a ${what} name or -f FILE, not both`);
  if (!name && !file) throw new UsageError(`give a ${what} name or -f FILE`);
}

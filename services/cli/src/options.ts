// Options several commands share, declared once so they read and behave the same everywhere.
import { InvalidArgumentError, Option, type Command } from "commander";
import { MAX_DURATION_MS } from "@ephemera/spec/names";
import { durationFlag } from "./duration.js";
import { UsageError } from "./errors.js";
import type { OutputFormat } from "./render.js";

/**
 * `-f, --filename FILE` (Signadot's spelling) and `--file FILE` (eph's first one, kept for
 * the scripts that use it): one file, named once. The same file named twice is fine, two
 * different ones a usage error. Actions read `opts.file`.
 */
export function fileOptions(cmd: Command, what: string): Command {
  const sameFile = (flag: string) => (value: string) => {
    const given = [cmd.getOptionValue("filename"), cmd.getOptionValue("file")].filter((f): f is string => f !== undefined);
    const other = given.find((f) => f !== value);
    if (other !== undefined) throw new UsageError(`${flag} "${value}": the ${what} file was already given as "${other}"; give one file`);
    return value;
  };
  return cmd
    .addOption(new Option("-f, --filename <file>", `${what} file ("-" reads standard input)`).argParser(sameFile("-f/--filename")))
    .addOption(new Option("--file <file>").hideHelp().argParser(sameFile("--file")))
    .option("--set <var=value>", "value of an @{var} in the file (repeatable)", (v: string, all: string[]) => [...all, v], [])
    .hook("preAction", (command) => {
      command.setOptionValue("file", command.getOptionValue("filename") ?? command.getOptionValue("file"));
    });
}

export function outputOption(cmd: Command, formats: OutputFormat[] = ["json", "yaml"]): Command {
  return cmd.addOption(new Option("-o, --output <format>", "output format").choices(formats));
}

const TRUE = ["true", "t", "1"];
const FALSE = ["false", "f", "0"];

/** `--wait=false` and the like: true, false (any case), t, f, 1, 0, as Go's flags (Signadot's CLI) take them. */
function booleanValue(flag: string) {
  return (value: string): boolean => {
    const v = value.toLowerCase();
    if (TRUE.includes(v)) return true;
    if (FALSE.includes(v)) return false;
    throw new InvalidArgumentError(`${flag} takes true or false (${flag}, ${flag}=true, ${flag}=false or --no-wait)`);
  };
}

/**
 * `--wait` (the default: until the sandbox is `what`), `--wait=false`, `--wait false` or
 * `--no-wait` (return at once), and how long to wait.
 */
export function waitOptions(cmd: Command, what: string, defaultTimeout: string): Command {
  return cmd
    .addOption(new Option("--wait [bool]", `wait until the sandbox is ${what}, printing progress on stderr; --wait=false returns at once`)
      .argParser(booleanValue("--wait")).default(true))
    .addOption(new Option("--no-wait", "return at once (as --wait=false)"))
    .option("--wait-timeout <duration>", "how long to wait (e.g. 90s, 3m, 1h30m, 2d, 1w; at most 365 days)", defaultTimeout);
}

/** Whether `--wait` was given on the command line (not only its default). */
export function waitAskedFor(cmd: Command): boolean {
  return cmd.getOptionValueSource("wait") === "cli" && cmd.getOptionValue("wait") === true;
}

/**
 * The command line as commander should read it. An option with an optional value takes the
 * next word as its value, so `delete --wait NAME` would lose NAME to `--wait`: a boolean
 * flag takes the next word only when it is `true` or `false`, and is `FLAG=true` otherwise.
 */
export function readableArgs(argv: string[], booleanFlags: readonly string[] = ["--wait"]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") return [...out, ...argv.slice(i)];
    const next = argv[i + 1]?.toLowerCase();
    out.push(booleanFlags.includes(arg) && next !== "true" && next !== "false" ? `${arg}=true` : arg);
  }
  return out;
}

export function timeoutMs(text: string): number {
  return durationFlag("--wait-timeout", text, MAX_DURATION_MS.wait);
}

/** NAME or `-f FILE`, exactly one of them. */
export function nameOrFile(name: string | undefined, file: string | undefined, what: string): void {
  if (name && file) throw new UsageError(`give either a ${what} name or -f FILE, not both`);
  if (!name && !file) throw new UsageError(`give a ${what} name or -f FILE`);
}

// Reading plugin and sandbox files: templating and validation run here, before any call,
// so a wrong file is reported at once with every problem it has. The file models
// (@ephemera/spec, with its YAML and schema code) load only for a command that reads a file.
import { isValidationError } from "@ephemera/kit/errors";
import type * as pb from "@ephemera/proto";
import type * as SpecModule from "@ephemera/spec";
import { UsageError } from "./errors.js";

export interface FileInput {
  file: string;
  sets: string[];
  stdin?: () => Promise<Uint8Array>;
  /** Told what the file has that is accepted but ignored (a plugin's stray `version:`). */
  warn?: (message: string) => void;
}

type Spec = typeof SpecModule;
let loaded: Spec | undefined;

/** @ephemera/spec, loaded on first use. */
export async function loadSpec(): Promise<Spec> {
  loaded ??= await import("@ephemera/spec");
  return loaded;
}

/** A template error can only come from @ephemera/spec, so none exists until it is loaded. */
export function isTemplateError(err: unknown): err is SpecModule.TemplateError {
  return loaded !== undefined && err instanceof loaded.TemplateError;
}

export async function readPlugin(input: FileInput): Promise<pb.ResourcePlugin> {
  const doc = await load(input, false);
  return (await loadSpec()).validatePlugin(doc, input.warn);
}

export async function readSandbox(input: FileInput): Promise<pb.Sandbox> {
  const doc = await load(input, false);
  return (await loadSpec()).validateSandbox(doc, input.warn);
}

export async function readRouteGroup(input: FileInput): Promise<pb.RouteGroup> {
  const doc = await load(input, false);
  return (await loadSpec()).validateRouteGroup(doc);
}

export async function readJobRunnerGroup(input: FileInput): Promise<pb.JobRunnerGroup> {
  const doc = await load(input, false);
  return (await loadSpec()).validateJobRunnerGroup(doc);
}

export async function readJob(input: FileInput): Promise<pb.Job> {
  const doc = await load(input, false);
  return (await loadSpec()).validateJob(doc);
}

/** The name a file publishes, needing only the variables used in `name` (for `delete -f`). */
export async function readName(input: FileInput): Promise<string> {
  const doc = await load(input, true);
  const name = (doc as { name?: unknown } | null)?.name;
  if (typeof name !== "string" || !name) throw new UsageError(`${describe(input.file)} has no name`);
  return name;
}

/** The exact version a plugin file publishes: a bare name is version 0.0.0. */
export async function publishedRef(name: string): Promise<string> {
  const ref = (await loadSpec()).parsePluginRef(name);
  return `${ref.name}@${ref.version ?? "0.0.0"}`;
}

async function load(input: FileInput, onlyName: boolean): Promise<unknown> {
  const { loadTemplate } = await loadSpec();
  try {
    return await loadTemplate(input.file, input.sets, { stdin: input.stdin, onlyName });
  } catch (err) {
    if (isTemplateError(err) || isValidationError(err)) throw err;
    if (err instanceof Error && /^YAML/.test(err.name)) {
      throw new UsageError(`${describe(input.file)} is not valid YAML: ${err.message}`);
    }
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "EISDIR" || code === "EACCES") {
      throw new UsageError(`cannot read ${describe(input.file)}: ${(err as Error).message}`);
    }
    throw err;
  }
}

function describe(file: string): string {
  return file === "-" ? "standard input" : file;
}

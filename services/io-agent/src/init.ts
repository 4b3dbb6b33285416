// The init agent: turns a step's resolved inputs into environment variables and files,
// and writes them (with the script) where the step's main program will find them.
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { dirname, posix } from "node:path";
import type * as pb from "@ephemera/proto";

/** The script's working directory and HOME; relative paths in a plugin resolve against it. */
export const STEP_HOME = "/tmp";

export interface StepFile {
  path: string;
  value: Buffer;
}

export interface StepPlan {
  script: string;
  /** Environment variables of the inputs (absent inputs are not set). */
  env: Record<string, string>;
  /** Input files to write, at absolute paths. */
  files: StepFile[];
  /** Declared outputs, with the absolute path each is read from after the script. */
  outputs: Array<{ name: string; path: string }>;
}

/** The env file's and input files' mode: readable by main, whatever its user (see writeStepFiles). */
export const INPUT_FILE_MODE = 0o644;

export const absolutePath = (p: string) => posix.resolve(STEP_HOME, p);

/** Pure: what the step's environment and filesystem must hold before the script starts. */
export function planStep(res: pb.GetStepInputsResponse): StepPlan {
  const env: Record<string, string> = {};
  const files: StepFile[] = [];
  for (const input of res.inputs) {
    if (!input.present) continue;
    if (input.env) env[input.env] = input.value.toString("utf8");
    if (input.path) files.push({ path: absolutePath(input.path), value: input.value });
  }
  return {
    script: res.script,
    env,
    files,
    outputs: res.outputs.map((o) => ({ name: o.name, path: absolutePath(o.valueFromPath) })),
  };
}

/**
 * Writes the input files and the executable script. The input files are 0644: `main` runs
 * as whichever user its image or overlay says, not the agent's, and must read them; they
 * are in the pod's own volumes, which nothing outside the pod mounts (`chmod` again, as
 * writeFile's mode applies only to a file it creates and the umask may narrow it).
 */
export async function writeStepFiles(plan: StepPlan, scriptPath: string): Promise<void> {
  for (const f of plan.files) {
    await mkdir(dirname(f.path), { recursive: true });
    await writeFile(f.path, f.value, { mode: INPUT_FILE_MODE });
    await chmod(f.path, INPUT_FILE_MODE);
  }
  await mkdir(dirname(scriptPath), { recursive: true });
  await writeFile(scriptPath, plan.script, { mode: 0o755 });
  await chmod(scriptPath, 0o755);
}

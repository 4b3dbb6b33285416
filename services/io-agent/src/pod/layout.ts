// The agent directory (an emptyDir shared by the containers of a runner pod): what each
// container writes there and reads back. docs/agent.md is the same contract in prose.
import { join } from "node:path";

/** Where the agent directory is mounted when EPHEMERA_AGENT_DIR does not say otherwise. */
export const DEFAULT_AGENT_DIR = "/ephemera";

/** Bumped when a file below changes meaning; `ephemera-agent version` prints it. */
export const LAYOUT_VERSION = 1;

export interface AgentPaths {
  /** POSIX sh script (0755) the main container runs as its command; written by init. */
  entrypoint: string;
  /** The step's script (0755); written by init. */
  script: string;
  /** `export NAME='value'` lines the entrypoint sources (0600); written by init. */
  env: string;
  /** The declared outputs, `[{ name, path }]` (no values); written by init, read by the sidecar. */
  outputs: string;
  /** The script's exit code and a newline, written by the entrypoint (temp file + rename). */
  exitCode: string;
  /** The StepReport (JSON, 0600), written by the sidecar, or by init when it fails. */
  report: string;
}

export function agentPaths(dir: string): AgentPaths {
  return {
    entrypoint: join(dir, "entrypoint"),
    script: join(dir, "script"),
    env: join(dir, "env"),
    outputs: join(dir, "outputs.json"),
    exitCode: join(dir, "exit-code"),
    report: join(dir, "report.json"),
  };
}

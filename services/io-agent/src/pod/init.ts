// `ephemera-agent init`, the init container: installs the entrypoint, fetches the step's
// inputs and script, and writes what the main container needs into the agent directory
// (the env file, the script) and at the declared input paths (volumes shared with main).
import { chmod, mkdir, rm, writeFile } from "node:fs/promises";
import { UnauthenticatedError, PermissionDeniedError, errorMessage, isRetryable } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { fetchStepInputs, ioContextClient } from "../client.js";
import { INPUT_FILE_MODE, planStep, writeStepFiles } from "../init.js";
import { FailureReason, type StepReport } from "../report.js";
import type { AgentConfig } from "./config.js";
import { entrypointScript } from "./entrypoint.js";
import { renderEnvFile, stepEnv } from "./envfile.js";
import { agentPaths } from "./layout.js";
import { retrying, writeReport, type Say } from "./write.js";

type Failed = Extract<StepReport, { outcome: "failed" }>;
export type InitResult = { ok: true; inputs: number; files: number; outputs: number } | { ok: false; report: Failed };

export async function runInit(config: AgentConfig, say: Say): Promise<InitResult> {
  const paths = agentPaths(config.agentDir);
  await mkdir(config.agentDir, { recursive: true });
  // A restarted init container starts over: nothing of an earlier attempt may pass for this one's.
  await Promise.all([paths.exitCode, paths.report].map((p) => rm(p, { force: true })));
  await writeFile(paths.entrypoint, entrypointScript(config.agentDir), { mode: 0o755 });
  await chmod(paths.entrypoint, 0o755); // the mode above applies only to a file it creates

  const failed = async (reason: FailureReason, message: string): Promise<InitResult> => {
    const report: Failed = { outcome: "failed", reason, message };
    await writeReport(paths.report, report, config.terminationMessagePath);
    return { ok: false, report };
  };

  const client = ioContextClient(config.iocontext, config.tls);
  let res: pb.GetStepInputsResponse;
  try {
    res = await fetchStepInputs(client, config.runId, config.token, retrying(config, say, "cannot get the step's inputs"));
  } catch (err) {
    // Still unreachable after the retries: the infrastructure's failure (the step runs again), not the plugin's.
    const reason = isRetryable(err) ? FailureReason.DriverError : FailureReason.InputUnavailable;
    const refused = err instanceof UnauthenticatedError || err instanceof PermissionDeniedError
      ? ` (the IO context refused the token of run ${config.runId}: EPHEMERA_TOKEN or EPHEMERA_TOKEN_FILE)` : "";
    return failed(reason, `cannot get the step's inputs from the IO context at ${config.iocontext}: ${errorMessage(err)}${refused}`);
  } finally {
    client.close();
  }

  const plan = planStep(res);
  let env: Buffer;
  try {
    env = renderEnvFile(stepEnv(res));
  } catch (err) {
    // The step's own inputs cannot be handed to it as declared: the plugin's failure, as a spawn error is in the process driver.
    return failed(FailureReason.Error, `cannot set the step's environment: ${errorMessage(err)}`);
  }
  try {
    // Readable by main, whose user is its image's or its overlay's, not the agent's (INPUT_FILE_MODE).
    await writeFile(paths.env, env, { mode: INPUT_FILE_MODE });
    await chmod(paths.env, INPUT_FILE_MODE);
    await writeFile(paths.outputs, JSON.stringify(plan.outputs), { mode: 0o644 });
    // Again, now that the outputs are known: it opens them to the sidecar.
    await writeFile(paths.entrypoint, entrypointScript(config.agentDir, plan.outputs.map((o) => o.path)), { mode: 0o755 });
    await writeStepFiles(plan, paths.script);
  } catch (err) {
    return failed(FailureReason.DriverError, `cannot prepare the step: ${errorMessage(err)}`);
  }
  return { ok: true, inputs: res.inputs.filter((i) => i.present).length, files: plan.files.length, outputs: plan.outputs.length };
}

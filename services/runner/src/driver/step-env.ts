// What of the runner reaches a step: its confinement settings, and of its environment
// PATH and LANG only. The runner's own variables (NATS_URL, REDIS_URL, EPHEMERA_* service
// config, credentials) never do; the step's variables are its default ones and its inputs.

/** The host variables a script gets. */
export const HOST_ENV_PASSED = ["PATH", "LANG"] as const;

/** The confinement settings sent in the step program's config (io-agent's type). */
export type { StepSandbox } from "@ephemera/io-agent";

/** Pure: only PATH and LANG of whatever host environment the driver was given. */
export function hostEnvForSteps(hostEnv: Record<string, string | undefined>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of HOST_ENV_PASSED) {
    const value = hostEnv[name];
    if (value !== undefined && value !== "") env[name] = value;
  }
  return env;
}

/** Pure: the script's own environment (defaults and dispatch variables) over the host's PATH and LANG. */
export const stepEnv = (hostEnv: Record<string, string | undefined>, own: Record<string, string>): Record<string, string> =>
  ({ ...hostEnvForSteps(hostEnv), ...own });

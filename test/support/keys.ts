// The signing key of tests that start a runner and an IO context themselves, and tokens
// signed with it for tests that call the IO context as a step would.
import { signCapability, signingKey, stepCapability, type StepCapability } from "@ephemera/kit";

/** As EPHEMERA_SIGNING_KEY, for the services a test starts as processes. */
export const TEST_KEY_SECRET = "ephemera test signing key, used by tests only";
export const TEST_KEY = signingKey(Buffer.from(TEST_KEY_SECRET));

/** A step's token granting `capability` for an hour. */
export const tokenFor = (capability: StepCapability) => signCapability(TEST_KEY, capability, 3_600_000);

/** The token the runner would give a run of `step`. */
type Step = Parameters<typeof stepCapability>[1] & { name: string };

export const tokenForStep = (runId: string, step: Step) => tokenFor(stepCapability(runId, step));

/** The token of a run (`<routingKey>.<resource>.<phase>.<step>.<attempt>`) of a step of `spec`; no rights if it names none. */
export function tokenForRun(spec: { create: Step[]; delete: Step[] }, runId: string): Promise<string> {
  const [, , phase, name] = runId.split(".");
  const step = phase === "create" || phase === "delete" ? spec[phase].find((s: Step) => s.name === name) : undefined;
  return step ? tokenForStep(runId, step) : tokenFor({ run: runId, inputs: [], outputs: [] });
}

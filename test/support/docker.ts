// Suites that need Docker (the images project): scripts/ensure-docker.sh installs and starts
// it where it can. Where it cannot (exit 3: no apt, no root, dockerd does not start), the
// suite is reported skipped with one line saying why, in CI too (.ci/run says it as well).
// Any other failure of the script fails the suite.
import { execFile, spawnSync } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";

const ROOT = join(__dirname, "..", "..");

/** Why Docker cannot run here, or undefined once it answers; any failure other than exit 3 throws. */
export function ensureDocker(): string | undefined {
  const ensured = spawnSync("bash", [join(ROOT, "scripts/ensure-docker.sh")], { encoding: "utf8", timeout: 300_000 });
  if (ensured.status === 3) return ensured.stderr.trim().split("\n").pop() ?? "ensure-docker.sh exited 3";
  if (ensured.status !== 0) throw new Error(`ensure-docker.sh exited ${ensured.status}: ${ensured.stderr}`);
  return undefined;
}

/** `describe(title, body)` where Docker runs; else one skipped test naming why. */
export function describeWithDocker(title: string, body: () => void): void {
  const cannotRun = ensureDocker();
  if (cannotRun === undefined) {
    describe(title, body);
  } else {
    console.log(`${title}: not run: ${cannotRun}`);
    it.skip(`${title} (${cannotRun})`, () => undefined);
  }
}

const run = promisify(execFile);

/** Runs `f`; a failure says what each of `containers` (names, read when it fails) said last. */
export async function withContainerLogs(containers: readonly string[], f: () => Promise<void>): Promise<void> {
  try {
    await f();
  } catch (err) {
    const tails = await Promise.all(containers.map(async (name) => {
      const logs = await run("docker", ["logs", "--tail", "15", name]).catch((e: Error) => ({ stdout: e.message, stderr: "" }));
      return `--- ${name}\n${logs.stdout}${logs.stderr}`;
    }));
    throw new Error(`${(err as Error).message}\n${tails.join("\n")}`, { cause: err });
  }
}

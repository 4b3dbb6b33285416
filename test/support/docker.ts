// Suites that need Docker (the images project): scripts/ensure-docker.sh installs and starts
// it where it can. Where it cannot (exit 3), one line says why: under CI=true that is a
// failure, elsewhere the suite is reported skipped.
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..");

/** Why Docker cannot run here, or undefined once it answers; any failure other than exit 3 throws. */
export function ensureDocker(): string | undefined {
  const ensured = spawnSync("bash", [join(ROOT, "scripts/ensure-docker.sh")], { encoding: "utf8", timeout: 300_000 });
  if (ensured.status === 3) return ensured.stderr.trim().split("\n").pop() ?? "ensure-docker.sh exited 3";
  if (ensured.status !== 0) throw new Error(`ensure-docker.sh exited ${ensured.status}: ${ensured.stderr}`);
  return undefined;
}

/** `describe(title, body)` where Docker runs; else a skipped test (outside CI) or a failing one (CI), naming why. */
export function describeWithDocker(title: string, body: () => void): void {
  const cannotRun = ensureDocker();
  if (cannotRun === undefined) {
    describe(title, body);
  } else if (process.env["CI"] !== "true") {
    console.log(`${title}: not run: ${cannotRun}`);
    it.skip(`${title} (${cannotRun})`, () => undefined);
  } else {
    it(title, () => {
      throw new Error(`Docker should run in CI, and cannot: ${cannotRun}`);
    });
  }
}

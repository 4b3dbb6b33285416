// The browser tests' Chromium: Debian's (scripts/ensure-chromium.sh installs it), driven by
// playwright-core, which never downloads a browser of its own. Where it cannot run, the
// suite is reported skipped with one line saying why, in CI too.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";

const ROOT = join(__dirname, "..", "..");
export const CHROMIUM = process.env["EPHEMERA_CHROMIUM"] || "/usr/bin/chromium";

/** Why the browser tests cannot run here, or undefined when they can. */
export function browserMissing(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  const err = join(ROOT, ".ephemera", "chromium.err");
  return existsSync(err) ? readFileSync(err, "utf8").trim() : `no browser at ${CHROMIUM} (scripts/ensure-chromium.sh installs Debian's chromium)`;
}

/** `describe(title, body)` where Chromium runs; else one skipped test naming why. */
export function describeWithBrowser(title: string, body: () => void): void {
  const missing = browserMissing();
  if (missing === undefined) {
    describe(title, body);
    return;
  }
  describe(title, () => {
    it.skip(`${title} (browser tests not run: ${missing})`, () => undefined);
  });
}

/** Headless Chromium as root can run it here: without its sandbox. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"], headless: true });
}

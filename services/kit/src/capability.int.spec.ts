// Services starting at once create the shared signing key file together: every one of them
// gets the same whole key, none reads a file another is still writing.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";

const KIT = resolve(__dirname, "..", "dist", "index.js");

interface Racer { proc: ChildProcess; ready: Promise<void>; result: Promise<string> }

/** One process that loads kit, says ready, and on "go" reads (or creates) the key file and prints the key's id and size. */
function racer(file: string): Racer {
  const script = `
    const { signingKeys } = await import(${JSON.stringify(KIT)});
    process.stdin.once("data", () => {
      try {
        const [k] = signingKeys({}, ${JSON.stringify(file)});
        process.stdout.write(k.id + " " + k.secret.length);
      } catch (err) { process.stdout.write("error: " + err.message); }
      process.exit(0);
    });
    process.stdout.write("ready\\n");`;
  const proc = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  proc.stdout!.on("data", (c: Buffer) => { out += c.toString(); if (out.startsWith("ready\n")) ready(); });
  const result = new Promise<string>((done) => proc.on("exit", () => done(out.replace(/^ready\n/, ""))));
  return { proc, ready: isReady, result };
}

describe("the shared signing key file", () => {
  let dir: string;
  beforeEach(() => { dir = mkdtempSync("/var/tmp/ephemera-keyrace-"); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("is created once when eight services start at the same moment: all get the same whole key", async () => {
    const file = join(dir, "p", "signing.key");
    const racers = Array.from({ length: 8 }, () => racer(file));
    // A barrier: every process has loaded kit and waits; then all are released together.
    await Promise.all(racers.map((r) => r.ready));
    for (const r of racers) r.proc.stdin!.write("go\n");
    const keys = await Promise.all(racers.map((r) => r.result));
    expect(keys.filter((k) => k.startsWith("error"))).toEqual([]);
    expect(new Set(keys).size).toBe(1);
    expect(Number(keys[0]!.split(" ")[1])).toBeGreaterThanOrEqual(32);
    expect(readdirSync(join(dir, "p"))).toEqual(["signing.key"]); // no staged file left behind
  }, 30_000);
});

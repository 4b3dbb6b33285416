// The kubectl-able patch as a command (see patch/cli.ts).
import { readFileSync } from "node:fs";
import { runPatch } from "./patch/cli.js";

process.exitCode = runPatch(process.argv.slice(2), {
  env: process.env,
  stdin: () => readFileSync(0, "utf8"),
  stdout: (text) => process.stdout.write(text),
  stderr: (line) => process.stderr.write(`${line}\n`),
});

#!/usr/bin/env node
// The `eph` executable: runs the program against this process's streams.
import { readFileSync } from "node:fs";
import { argumentNotUtf8 } from "./argv.js";
import { run } from "./program.js";

/** Bytes, not text: a file on standard input is checked as UTF-8 like any other. */
async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Linux shows a process its command line as bytes; elsewhere there is nothing to check. */
function commandLine(): Uint8Array | undefined {
  try {
    return readFileSync("/proc/self/cmdline");
  } catch {
    return undefined;
  }
}

// Node's deprecation notices are for the program's authors, not its users (grpc-js names the
// server by its IP when the API is an address, which Node flags as DEP0123).
process.noDeprecation = true;

// `eph events --follow | head` closes our stdout: that is the reader being done, not a failure.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(0);
  throw err;
});

const args = process.argv.slice(2);
const cmdline = commandLine();
const notUtf8 = cmdline && argumentNotUtf8(cmdline, args.length);
if (notUtf8) {
  process.stderr.write(`error: ${notUtf8}\n`);
  process.exitCode = 2;
} else {
  process.exitCode = await run(args, {
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: readStdin,
    self: [process.execPath, ...process.execArgv, process.argv[1]!],
  });
}

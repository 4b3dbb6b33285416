#!/usr/bin/env node
// The `eph` executable: runs the program against this process's streams.
import { run } from "./program.js";

/** Bytes, not text: a file on standard input is checked as UTF-8 like any other. */
async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

// Node's deprecation notices are for the program's authors, not its users (grpc-js names the
// server by its IP when the API is an address, which Node flags as DEP0123).
process.noDeprecation = true;

// `eph events --follow | head` closes our stdout: that is the reader being done, not a failure.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(0);
  throw err;
});

process.exitCode = await run(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: readStdin,
});

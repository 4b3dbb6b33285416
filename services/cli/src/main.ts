#!/usr/bin/env node
// The `eph` executable: runs the program against this process's streams.
import { run } from "./program.js";

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
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

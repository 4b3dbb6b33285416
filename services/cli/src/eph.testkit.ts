// `eph` run in-process against an API address, as a user runs it: arguments in, standard
// output, standard error and the exit code out; and the real core it runs against.
import { errorMessage } from "@ephemera/kit";
import { startCore, type Core, type CoreOptions } from "../../../test/support/core.js";
import { run } from "./program.js";

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
}

/** What a running `eph` has printed so far. */
export interface Live {
  stdout: string;
  stderr: string;
}

/** Runs `eph` in-process against `api`; `live` sees the output while it runs. */
export async function eph(
  api: string,
  args: string[],
  opts: { stdin?: string | Uint8Array; signal?: AbortSignal; env?: Record<string, string>; live?: Live } = {},
): Promise<Ran> {
  const out: Buffer[] = [];
  const stdin = typeof opts.stdin === "string" ? Buffer.from(opts.stdin) : opts.stdin;
  const live = opts.live ?? { stdout: "", stderr: "" };
  const code = await run(args, {
    env: { EPHEMERA_API: api, ...opts.env },
    stdout: { write: (c) => { out.push(Buffer.from(c)); live.stdout += Buffer.from(c).toString(); } },
    stderr: { write: (c) => { live.stderr += Buffer.from(c).toString(); } },
    stdin: stdin === undefined ? undefined : async () => stdin,
    signal: opts.signal,
  }).catch((err: unknown) => {
    live.stderr += `run() threw: ${errorMessage(err)}`;
    return -1;
  });
  const stdoutBytes = Buffer.concat(out);
  return { code, stdout: stdoutBytes.toString(), stderr: live.stderr, stdoutBytes };
}

/**
 * A fresh in-memory ephemera for each test of the calling `describe` (or file): the getter
 * returns the current test's. Stopped after each test, with nothing left running.
 */
export function useCore(options?: CoreOptions): () => Core {
  let core: Core | undefined;
  beforeEach(async () => { core = await startCore(options); });
  afterEach(async () => {
    const stopping = core?.stop();
    core = undefined;
    await stopping;
  });
  return () => {
    if (!core) throw new Error("useCore(): no core outside a test");
    return core;
  };
}

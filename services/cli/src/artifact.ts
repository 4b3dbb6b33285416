// `eph artifact download --job NAME PATH [-o FILE]`: the bytes of one of a job's artifacts
// (a path of its uploadArtifact its pod stored, or `@stdout` / `@stderr`, its output
// streams), byte for byte to standard output or to FILE. FILE is written whole or not at
// all: the bytes go to a temporary file beside it, renamed once the download has ended.
import { rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, basename } from "node:path";
import type { Command } from "commander";
import type { Context } from "./context.js";

export function registerArtifact(program: Command, ctx: Context): void {
  const artifact = program.command("artifact").description("download a job's artifacts (eph job get lists them)");
  artifact.command("download").description("write a job's artifact (a path of its uploadArtifact, @stdout or @stderr) to stdout or -o FILE")
    .requiredOption("--job <name>", "the job")
    .argument("<path>", "the artifact's path, @stdout or @stderr")
    .option("-o, --output <file>", "write it to this file instead of standard output")
    .action(async (path: string, opts: { job: string; output?: string }) => {
      const api = await ctx.api();
      if (!opts.output) {
        await api.downloadArtifact(opts.job, path, (chunk) => ctx.out(chunk.data), {});
        return;
      }
      const parts: Buffer[] = [];
      await api.downloadArtifact(opts.job, path, (chunk) => parts.push(Buffer.from(chunk.data)), {});
      const partial = join(dirname(opts.output), `.${basename(opts.output)}.eph-partial`);
      try {
        await writeFile(partial, Buffer.concat(parts));
        await rename(partial, opts.output);
      } catch (err) {
        await rm(partial, { force: true });
        throw err;
      }
    });
}

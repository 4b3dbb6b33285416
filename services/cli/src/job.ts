// `eph job …`: submit a job to a job runner group's queue, see where it stands, list the
// queued and running ones (or all), delete one (a queued job is cancelled at once, a running
// one stopped by its pod). `submit --attach` streams the job's stdout and stderr to eph's own
// and exits with the job's exit code; `get` ends with the last lines of the job's output.
import type { Command } from "commander";
import type * as pb from "@ephemera/proto";
import type { Context } from "./context.js";
import { UsageError } from "./errors.js";
import { readJob } from "./files.js";
import { fileOptions, outputOption } from "./options.js";
import type { OutputFormat } from "./render.js";
import { shortTime, table } from "./table.js";

const render = () => import("./render.js");

/** `submit --attach`'s exit code for a job Failed without an exit code of its own (timeout, pod lost, error). */
export const EXIT_JOB_FAILED = 125;
/** `submit --attach`'s exit code for a job Cancelled. */
export const EXIT_JOB_CANCELLED = 130;
/** How many of the last lines of output `job get` shows. */
export const GET_OUTPUT_LINES = 20;
/** An attach ends with the job (bounded by its group's jobTimeout); this only guards against a lost server. */
const ATTACH_DEADLINE_MS = 8 * 24 * 3_600_000;
const GET_LOGS_DEADLINE_MS = 60_000;

/** The exit code `--attach` answers for a job that has ended. */
export function jobExitCode(view: pb.JobView): number {
  const status = view.status;
  if (status?.state === "Succeeded") return 0;
  if (status?.state === "Cancelled") return EXIT_JOB_CANCELLED;
  if (status?.exitCode !== undefined && status.exitCode !== 0) return status.exitCode & 0xff || EXIT_JOB_FAILED;
  return EXIT_JOB_FAILED;
}

/** The last `count` lines of a text (a last line without its newline counts). */
export function lastLines(text: string, count: number): string[] {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines.slice(-count);
}

interface FileOpts { file?: string; set: string[] }
interface OutputOpts { output?: OutputFormat }

export function registerJob(program: Command, ctx: Context): void {
  const job = program.command("job").description("submit, inspect and delete jobs (a script or command run on a pod of a job runner group)");

  fileOptions(job.command("submit").description("queue the job a file describes; prints its generated name"), "job")
    .option("--attach", `stream the job's stdout and stderr here as it runs (its name goes to stderr) and exit with its exit code (Failed without one: ${EXIT_JOB_FAILED}; Cancelled: ${EXIT_JOB_CANCELLED})`)
    .action(async (opts: FileOpts & { attach?: boolean }) => {
      if (!opts.file) throw new UsageError("job submit needs -f FILE");
      const spec = await readJob({ file: opts.file, sets: opts.set, stdin: ctx.io.stdin });
      const api = await ctx.api();
      const view = await api.submitJob(spec);
      if (!opts.attach) return ctx.out(`${view.name}\n`);
      ctx.err(`job ${view.name} submitted`);
      await api.streamJobLogs({ name: view.name, follow: true }, (chunk) => {
        (chunk.stream === "stderr" ? ctx.io.stderr : ctx.io.stdout).write(Buffer.from(chunk.data));
      }, { deadline: Date.now() + ATTACH_DEADLINE_MS, signal: ctx.io.signal });
      const done = await api.getJob(view.name);
      const status = done.status;
      ctx.exitCode = jobExitCode(done);
      if (status?.state !== "Succeeded") ctx.err(`job ${view.name} ${status?.state ?? ""}${status?.reason ? ` (${status.reason})` : ""}${status?.message ? `: ${status.message}` : ""}`);
    });

  outputOption(job.command("get").description("show a job: its spec, state, pod, exit code and times").argument("<name>"))
    .action(async (name: string, opts: OutputOpts) => {
      const api = await ctx.api();
      const view = await api.getJob(name);
      const { formatDoc, jobDoc } = await render();
      ctx.out(formatDoc(jobDoc(view), opts.output ?? "yaml"));
      if (opts.output || view.status?.state === "Queued") return;
      // The human view ends with the last lines of output, stdout and stderr as they were stored.
      const chunks: Buffer[] = [];
      await api.streamJobLogs({ name, follow: false }, (chunk) => { chunks.push(Buffer.from(chunk.data)); }, { deadline: Date.now() + GET_LOGS_DEADLINE_MS, signal: ctx.io.signal });
      const tail = lastLines(Buffer.concat(chunks).toString(), GET_OUTPUT_LINES);
      ctx.out(tail.length ? `# last ${GET_OUTPUT_LINES} lines of output:\n${tail.map((l) => `#   ${l}\n`).join("")}` : "# no output\n");
    });

  outputOption(job.command("list").alias("ls").description("the queued and running jobs, in the order they were submitted")
    .option("--all", "the ended jobs too"))
    .action(async (opts: OutputOpts & { all?: boolean }) => {
      const views = await (await ctx.api()).listJobs(opts.all ?? false);
      if (opts.output) {
        const { formatDoc, jobDoc } = await render();
        return ctx.out(formatDoc(views.map(jobDoc), opts.output));
      }
      ctx.out(table(["NAME", "GROUP", "STATE", "POD", "EXIT", "SUBMITTER", "QUEUED"], views.map((v) => [
        v.name, v.spec?.runnerGroup ?? "", v.status?.state ?? "", v.status?.pod ?? "",
        v.status?.exitCode === undefined ? "" : String(v.status.exitCode), v.submitter, shortTime(v.status?.queuedAt ?? ""),
      ])));
    });

  job.command("delete").alias("rm").description("delete a job: a queued one is cancelled at once, a running one is stopped by its pod").argument("<name>")
    .action(async (name: string) => {
      const view = await (await ctx.api()).deleteJob(name);
      const state = view.status?.state ?? "";
      ctx.out(state === "Running" ? `job ${name}: cancel requested (pod ${view.status?.pod} is stopping it)\n` : `job ${name} ${state === "Cancelled" ? "cancelled" : `already ${state}`}\n`);
    });
}

// `eph job …`: submit a job to a job runner group's queue, see where it stands, list the
// queued and running ones (or all), delete one (a queued job is cancelled at once, a running
// one stopped by its pod).
import type { Command } from "commander";
import type { Context } from "./context.js";
import { UsageError } from "./errors.js";
import { readJob } from "./files.js";
import { fileOptions, outputOption } from "./options.js";
import type { OutputFormat } from "./render.js";
import { shortTime, table } from "./table.js";

const render = () => import("./render.js");

interface FileOpts { file?: string; set: string[] }
interface OutputOpts { output?: OutputFormat }

export function registerJob(program: Command, ctx: Context): void {
  const job = program.command("job").description("submit, inspect and delete jobs (a script or command run on a pod of a job runner group)");

  fileOptions(job.command("submit").description("queue the job a file describes; prints its generated name"), "job")
    .action(async (opts: FileOpts) => {
      if (!opts.file) throw new UsageError("job submit needs -f FILE");
      const spec = await readJob({ file: opts.file, sets: opts.set, stdin: ctx.io.stdin });
      const view = await (await ctx.api()).submitJob(spec);
      ctx.out(`${view.name}\n`);
    });

  outputOption(job.command("get").description("show a job: its spec, state, pod, exit code and times").argument("<name>"))
    .action(async (name: string, opts: OutputOpts) => {
      const view = await (await ctx.api()).getJob(name);
      const { formatDoc, jobDoc } = await render();
      ctx.out(formatDoc(jobDoc(view), opts.output ?? "yaml"));
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

// `eph jobrunnergroup …` (alias `jrg`): apply, inspect and delete job runner groups, the
// pods kept ready to run jobs. Applying and deleting one is an admin's.
import type * as pb from "@ephemera/proto";
import type { Command } from "commander";
import type { Context } from "./context.js";
import { UsageError } from "./errors.js";
import { readJobRunnerGroup, readName } from "./files.js";
import { fileOptions, nameOrFile, outputOption } from "./options.js";
import type { OutputFormat } from "./render.js";
import { shortTime, table } from "./table.js";

const render = () => import("./render.js");

interface FileOpts { file?: string; set: string[] }
interface OutputOpts { output?: OutputFormat }

export function registerJobRunnerGroup(program: Command, ctx: Context): void {
  const jrg = program.command("jobrunnergroup").alias("jrg").description("apply, inspect and delete job runner groups (pods kept ready to run jobs)");

  outputOption(fileOptions(jrg.command("apply").description("create or update the job runner group a file describes (cluster and namespace cannot change)"), "job runner group")
    .option("--dry-run", "validate on the server and say what would change; change nothing"))
    .action(async (opts: FileOpts & OutputOpts & { dryRun?: boolean }) => {
      if (!opts.file) throw new UsageError("jobrunnergroup apply needs -f FILE");
      const group = await readJobRunnerGroup({ file: opts.file, sets: opts.set, stdin: ctx.io.stdin });
      const res = await (await ctx.api()).applyJobRunnerGroup(group, opts.dryRun ?? false);
      if (opts.output && res.jobRunnerGroup) {
        const { formatDoc, jobRunnerGroupDoc } = await render();
        return ctx.out(formatDoc(jobRunnerGroupDoc(res.jobRunnerGroup), opts.output));
      }
      const verb = res.created ? "created" : res.unchanged ? "unchanged" : "updated";
      if (opts.dryRun) {
        ctx.out(`job runner group ${group.name}: would ${res.unchanged ? "change nothing" : verb === "created" ? "be created" : "be updated"} (dry run: nothing written)\n`);
      } else {
        ctx.out(`job runner group ${group.name} ${verb}\n`);
      }
      for (const c of res.changes) ctx.out(`  change ${c.field}: ${c.oldJson} -> ${c.newJson}\n`);
      if (res.jobRunnerGroup) ctx.out(summary(res.jobRunnerGroup));
    });

  outputOption(jrg.command("get").description("show a job runner group: its spec and status").argument("<name>"))
    .action(async (name: string, opts: OutputOpts) => {
      const view = await (await ctx.api()).getJobRunnerGroup(name);
      const { formatDoc, jobRunnerGroupDoc } = await render();
      ctx.out(formatDoc(jobRunnerGroupDoc(view), opts.output ?? "yaml"));
    });

  outputOption(jrg.command("list").alias("ls").description("every job runner group and its status"))
    .action(async (opts: OutputOpts) => {
      const views = await (await ctx.api()).listJobRunnerGroups();
      if (opts.output) {
        const { formatDoc, jobRunnerGroupDoc } = await render();
        return ctx.out(formatDoc(views.map(jobRunnerGroupDoc), opts.output));
      }
      ctx.out(table(["NAME", "CLUSTER", "READY", "STATUS", "PODS", "IMAGE", "CREATED"], views.map((v) => [
        v.name, v.spec?.cluster ?? "", v.status?.ready ? "true" : "false", v.status?.reason ?? "", String(v.status?.desiredPods ?? 0),
        v.spec?.image ?? "", shortTime(v.createdAt),
      ])));
    });

  fileOptions(jrg.command("delete").alias("rm").description("delete a job runner group (its pods are removed)").argument("[name]"), "job runner group")
    .action(async (name: string | undefined, opts: FileOpts) => {
      nameOrFile(name, opts.file, "job runner group");
      const target = name ?? (await readName({ file: opts.file!, sets: opts.set, stdin: ctx.io.stdin }));
      await (await ctx.api()).deleteJobRunnerGroup(target);
      ctx.out(`job runner group ${target} deleted\n`);
    });
}

function summary(v: pb.JobRunnerGroupView): string {
  return `  status: ${v.status?.reason ?? ""}${v.status?.message ? ` (${v.status.message})` : ""}\n`;
}

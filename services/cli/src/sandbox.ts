// `eph sandbox …` (alias `sb`): apply, inspect and delete sandboxes. apply, delete and retry
// wait until the sandbox is ready (or gone) unless told --wait=false, as Signadot's CLI does.
import type * as pb from "@ephemera/proto";
import type { Command } from "commander";
import type { Context } from "./context.js";
import { errorMessage } from "@ephemera/kit/errors";
import { OperationFailed, UsageError } from "./errors.js";
import { readName, readSandbox } from "./files.js";
import { fileOptions, nameOrFile, outputOption, timeoutMs, waitAskedFor, waitOptions } from "./options.js";
import { describeFailures, stillWaitingFor, words, type History } from "./progress.js";

/** How long a create may take before the CLI says it is held for admission. */
const ADMISSION_NOTICE_MS = 2_000;
import type { OutputFormat } from "./render.js";
import { registerGetStatus } from "./status.js";
import { shortTime, table } from "./table.js";

// Loaded by the commands that use them, so each command pays only for what it runs
// (render.js brings the wire types and YAML).
const render = () => import("./render.js");
const local = () => import("./local.js");
const wait = () => import("./wait.js");

interface FileOpts { file?: string; set: string[] }
interface WaitOpts { wait: boolean; waitTimeout: string }

export function registerSandbox(program: Command, ctx: Context): void {
  const sandbox = program.command("sandbox").alias("sb").description("apply, inspect and delete sandboxes");

  outputOption(waitOptions(fileOptions(sandbox.command("apply").description("create or update the sandbox a file describes"), "sandbox"), "ready", "3m")
    .option("--dry-run", "validate against the published plugins and print the plan; change nothing"))
    .action(async (opts: FileOpts & WaitOpts & { dryRun?: boolean; output?: OutputFormat }, cmd: Command) => {
      if (!opts.file) throw new UsageError("sandbox apply needs -f FILE");
      const limit = timeoutMs(opts.waitTimeout);
      const spec = await readSandbox({ file: opts.file, sets: opts.set, stdin: ctx.io.stdin });
      // A dry run never waits; only a --wait asked for in so many words is a contradiction.
      if (opts.dryRun) {
        if (waitAskedFor(cmd)) throw new UsageError("--dry-run changes nothing, so there is nothing to --wait for");
        const { plan } = await (await ctx.api()).applySandbox(spec, true);
        ctx.out(opts.output ? (await render()).formatDoc(planDoc(spec.name, plan!), opts.output) : planText(spec.name, plan!));
        return;
      }
      const api = await ctx.api();
      // The API holds a create under a burst until runners start the sandboxes before it (admission): say so.
      const held = setTimeout(() => ctx.err(`sandbox ${spec.name}: waiting for the API to admit it (runners are starting the sandboxes created before it)`), ADMISSION_NOTICE_MS);
      const res = await api.applySandbox(spec).finally(() => clearTimeout(held));
      const verb = res.created ? "created" : res.unchanged ? "unchanged" : "updated";
      ctx.out(`sandbox ${spec.name} ${verb}${res.sandbox?.routingKey ? ` (routing key ${res.sandbox.routingKey})` : ""}\n`);
      if (!opts.wait) return;
      // Of a sandbox this apply created, everything the first view shows is news.
      await waitUntilReady(ctx, spec.name, limit, opts.waitTimeout, res.created ? "none" : "all");
    });

  outputOption(
    sandbox.command("get").description("show a sandbox, its resources and their outputs").argument("<name>")
      .option("--show-outputs", "include output values (secrets: shown only when asked)"),
  ).action(async (name: string, opts: { output?: OutputFormat; showOutputs?: boolean }) => {
    const view = await (await ctx.api()).getSandbox(name, opts.showOutputs ?? false);
    const { formatDoc, sandboxDoc } = await render();
    ctx.out(formatDoc(sandboxDoc(view, opts.showOutputs ?? false), opts.output ?? "yaml"));
  });

  registerGetStatus(sandbox, ctx);

  outputOption(
    sandbox.command("get-env")
      .description("print the environment of a local workload (dotenv): the baseline's from the cluster when eph local connect serves it, resource outputs resolved")
      .argument("<name>")
      .requiredOption("--local <name>", "the local workload (spec.local[].name)")
      .option("--no-cluster", "leave out what only the cluster has, even when eph local connect could read it"),
  ).action(async (name: string, opts: { local: string; cluster: boolean; output?: OutputFormat }) => {
    const values = await localValuesOf(ctx, name, opts.local, opts.cluster);
    for (const u of values.unresolved.env) ctx.err(`not set: ${u}`);
    const { dotenv } = await local();
    if (!opts.output) return ctx.out(dotenv(values.env));
    const { formatDoc } = await render();
    ctx.out(formatDoc(Object.fromEntries(values.env.map((e) => [e.name, e.value])), opts.output));
  });

  sandbox.command("get-files")
    .description("write the files of a local workload (mode 0600): resource outputs resolved, the cluster's values when eph local connect serves it")
    .argument("<name>")
    .requiredOption("--local <name>", "the local workload (spec.local[].name)")
    .option("--dir <dir>", "the directory their paths are re-rooted in", ".")
    .option("--no-cluster", "leave out what only the cluster has, even when eph local connect could read it")
    .action(async (name: string, opts: { local: string; dir: string; cluster: boolean }) => {
      const values = await localValuesOf(ctx, name, opts.local, opts.cluster);
      const { writeLocalFiles } = await local();
      for (const u of values.unresolved.files) ctx.err(`not written: ${u}`);
      for (const path of await writeLocalFiles(values.files, opts.dir)) ctx.out(`${path}\n`);
    });

  outputOption(sandbox.command("list").alias("ls").description("every sandbox and its status"))
    .action(async (opts: { output?: OutputFormat }) => {
      const views = [...(await (await ctx.api()).listSandboxes())].sort((a, b) => a.name.localeCompare(b.name));
      if (opts.output) {
        const { formatDoc, sandboxDocs } = await render();
        return ctx.out(formatDoc(sandboxDocs(views), opts.output));
      }
      const rows = views.map(listRow);
      ctx.out(table(["NAME", "READY", "STATUS", "RESOURCES", "CREATED"], rows.map((r) => r.cells)));
      // What is wrong with a sandbox that cannot be shown, under the table (a cell would be too narrow).
      for (const { problem } of rows) if (problem) ctx.out(`${problem}\n`);
    });

  waitOptions(
    fileOptions(
      sandbox.command("delete").alias("rm").description("delete a sandbox, running its resources' delete workflows")
        .argument("[name]").option("--force", "remove it without running the delete workflows"),
      "sandbox",
    ),
    "gone",
    "5m",
  ).action(async (name: string | undefined, opts: FileOpts & WaitOpts & { force?: boolean }) => {
    nameOrFile(name, opts.file, "sandbox");
    const limit = timeoutMs(opts.waitTimeout);
    const target = name ?? (await readName({ file: opts.file!, sets: opts.set, stdin: ctx.io.stdin }));
    // --force is the last resort: say which teardowns it skips (what they would have removed may remain).
    const api = await ctx.api();
    const before = opts.force ? await api.getSandbox(target).catch(() => undefined) : undefined;
    const view = await api.deleteSandbox(target, opts.force ?? false);
    for (const r of before?.resources ?? []) {
      if (r.status === "Deprovisioned") continue;
      ctx.err(`--force skips the delete workflow of resource ${r.name} (${words(r.status)}): what it created is not cleaned up`);
    }
    if (view.status?.reason === "Deleted") return ctx.out(`sandbox ${target} deleted\n`);
    ctx.out(`sandbox ${target} deleting\n`);
    if (opts.wait) await waitUntilGone(ctx, target, limit, opts.waitTimeout);
  });
  registerRetry(sandbox, ctx);
}

/** A local's values: the cluster's part through eph local connect's daemon unless told not to (stderr says why it is missing). */
async function localValuesOf(ctx: Context, name: string, localName: string, cluster: boolean) {
  const view = await (await ctx.api()).getSandbox(name, true);
  const { clusterEnvironment, localValues } = await local();
  // A local the sandbox lacks is refused before any daemon is asked.
  const without = localValues(view, localName);
  if (!cluster) return without;
  const { stateDir } = await import("./workstation/state.js");
  const found = await clusterEnvironment(stateDir(ctx.io.env), name, localName);
  if ("environment" in found) return localValues(view, localName, found.environment);
  const { baselineLabel, baselineOf } = await import("@ephemera/kit/fork-name");
  const baseline = baselineLabel(baselineOf(view.spec?.local.find((l) => l.name === localName)?.from));
  ctx.err(`not included: the env of the baseline ${baseline} (${found.why})`);
  return without;
}

export function registerRetry(sandbox: Command, ctx: Context): void {
  waitOptions(
    sandbox.command("retry").description("run the failed resources' create workflows again (their failed steps, as new attempts)")
      .argument("<name>"),
    "ready",
    "3m",
  ).action(async (name: string, opts: WaitOpts) => {
    const limit = timeoutMs(opts.waitTimeout);
    const api = await ctx.api();
    // The sandbox before the retry: the wait's lines are what changed since (a retried step
    // that ends before the watch's first view still gets its line).
    const before = opts.wait ? await api.getSandbox(name).catch(() => undefined) : undefined;
    const res = await api.retrySandbox(name);
    ctx.out(`sandbox ${name}: retrying ${res.resources.join(", ") || "the forks"}\n`);
    if (opts.wait) await waitUntilReady(ctx, name, limit, opts.waitTimeout, "all", before);
  });
}

async function waitUntilReady(
  ctx: Context, name: string, limit: number, limitText: string, history: History = "all", before?: pb.SandboxView,
): Promise<void> {
  const { waitForSandbox } = await wait();
  const result = await waitForSandbox(await ctx.api(), name, "ready", {
    timeoutMs: limit, log: (l) => ctx.err(l), signal: ctx.io.signal, history, ...(before ? { before } : {}),
  });
  switch (result.outcome) {
    case "ready":
      ctx.out(`sandbox ${name} ready\n`);
      for (const e of result.view.endpoints) ctx.out(`  ${e.name}: ${e.url} (target ${e.target})\n`);
      return;
    case "failed": {
      const reason = result.view.status?.reason ?? "";
      const details = describeFailures(result.view);
      if (details) ctx.err(details);
      throw new OperationFailed(`sandbox ${name} ${reason === "ResourceFailed" ? "failed" : `is ${words(reason)}`}${summary(result.view)}`);
    }
    case "gone":
      throw new OperationFailed(`sandbox ${name} was deleted while waiting for it to be ready`);
    case "timeout":
      throw new OperationFailed(
        `timed out after ${limitText} waiting for sandbox ${name} to be ready; still waiting for: ${stillWaitingFor(result.view, "ready")}`,
      );
  }
}

async function waitUntilGone(ctx: Context, name: string, limit: number, limitText: string): Promise<void> {
  const { waitForSandbox } = await wait();
  const result = await waitForSandbox(await ctx.api(), name, "gone", { timeoutMs: limit, log: (l) => ctx.err(l), signal: ctx.io.signal });
  switch (result.outcome) {
    case "gone":
      ctx.out(`sandbox ${name} deleted\n`);
      return;
    case "ready":
    case "failed": {
      const details = describeFailures(result.view);
      if (details) ctx.err(details);
      throw new OperationFailed(`deleting sandbox ${name} failed${summary(result.view)}`);
    }
    case "timeout":
      throw new OperationFailed(
        `timed out after ${limitText} waiting for sandbox ${name} to be deleted; still waiting for: ${stillWaitingFor(result.view, "gone")}`,
      );
  }
}

function summary(view: pb.SandboxView): string {
  return view.status?.message ? `: ${view.status.message}` : "";
}

/** One sandbox's row, rendered on its own: one that cannot be shown is a row saying so, and a line saying why. */
function listRow(v: pb.SandboxView): { cells: string[]; problem?: string } {
  try {
    const ready = v.resources.filter((r) => r.status === "Ready").length;
    const cells = [
      v.name, v.status?.ready ? "true" : "false", v.status?.reason ?? "", `${ready}/${v.resources.length}`, shortTime(v.createdAt),
    ];
    return v.renderError ? { cells, problem: `${v.name}: cannot be shown: ${v.renderError}` } : { cells };
  } catch (err) {
    return { cells: [v.name, "false", "RenderError", "?", ""], problem: `${v.name}: cannot be shown: ${errorMessage(err)}` };
  }
}

/** The plan of `sandbox apply --dry-run -o json|yaml` (a contract: scripts read it). */
function planDoc(name: string, plan: pb.SandboxPlan) {
  return {
    sandbox: name,
    action: plan.action,
    resources: plan.resources.map((r) => ({ name: r.name, plugin: r.plugin, version: r.version, params: r.params })),
    create: plan.create,
    delete: plan.delete,
    changes: plan.changes.map((c) => ({ field: c.field, old: JSON.parse(c.oldJson || "null"), new: JSON.parse(c.newJson || "null") })),
    endpoints: plan.endpoints.map((e) => ({ name: e.name, url: e.url })),
  };
}

function planText(name: string, plan: pb.SandboxPlan): string {
  const lines = [`sandbox ${name}: would ${plan.action === "unchanged" ? "change nothing" : plan.action} (dry run: nothing written)`];
  for (const r of plan.resources) lines.push(`  resource ${r.name}: ${r.plugin}@${r.version}`);
  for (const c of plan.changes) lines.push(`  change ${c.field}: ${c.oldJson} -> ${c.newJson}`);
  if (plan.create.length) lines.push(`  would run the create workflow of: ${plan.create.join(", ")}`);
  if (plan.delete.length) lines.push(`  would run the delete workflow of: ${plan.delete.join(", ")}`);
  return `${lines.join("\n")}\n`;
}

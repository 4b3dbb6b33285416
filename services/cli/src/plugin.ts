// `eph plugin …` (aliases `rp`, `resourceplugin`): publish, inspect and delete plugin versions.
import { NotFoundError } from "@ephemera/kit/errors";
import type * as pb from "@ephemera/proto";
import type { Command } from "commander";
import type { Context } from "./context.js";
import { UsageError } from "./errors.js";
import { publishedRef, readName, readPlugin } from "./files.js";
import { fileOptions, nameOrFile, outputOption } from "./options.js";
import type { OutputFormat } from "./render.js";
import { compareVersionsDesc, shortTime, table } from "./table.js";

/** The documents the commands print (wire types and YAML): loaded by the commands that print one. */
const render = () => import("./render.js");

interface FileOpts { file?: string; set: string[] }
interface OutputOpts { output?: OutputFormat }
interface ListOpts extends OutputOpts { allVersions?: boolean }

export function registerPlugin(program: Command, ctx: Context): void {
  const plugin = program
    .command("plugin")
    .alias("rp")
    .alias("resourceplugin")
    .description("publish, inspect and delete resource plugin versions");

  fileOptions(plugin.command("apply").description("publish the plugin version a file describes"), "plugin")
    .option("--dry-run", "validate on the server and say whether it would publish; change nothing")
    .action(async (opts: FileOpts & { dryRun?: boolean }) => {
      if (!opts.file) throw new UsageError("plugin apply needs -f FILE");
      const spec = await readPlugin({ file: opts.file, sets: opts.set, stdin: ctx.io.stdin, warn: (w) => ctx.err(`warning: ${w}`) });
      const res = await (await ctx.api()).applyPlugin(spec, opts.dryRun ?? false);
      const name = res.plugin ? `${res.plugin.name}@${res.plugin.version}` : spec.name;
      if (opts.dryRun) ctx.out(`plugin ${name}: would ${res.unchanged ? "change nothing (published as is)" : "be published"} (dry run: nothing written)\n`);
      else ctx.out(`plugin ${name} ${res.unchanged ? "unchanged" : "created"}\n`);
    });

  outputOption(plugin.command("get").description("show one plugin version (default: the latest)").argument("<ref>", "NAME, NAME@VERSION or NAME@latest"))
    .action(async (ref: string, opts: OutputOpts) => {
      const version = await (await ctx.api()).getPlugin(ref);
      const { formatDoc, pluginDoc } = await render();
      ctx.out(formatDoc(pluginDoc(version), opts.output ?? "yaml"));
    });

  outputOption(plugin.command("list").alias("ls")
    .description("the highest version of each plugin and how many sandboxes use it (-A: every version)")
    .option("-A, --all-versions", "list every published version, not only the highest of each plugin"))
    .action(async (opts: ListOpts) => {
      const sorted = sortVersions(await (await ctx.api()).listPlugins());
      // Sorted newest first within a name, so the first of each name is its highest version.
      const all = opts.allVersions ? sorted : sorted.filter((p, i) => i === 0 || sorted[i - 1]?.name !== p.name);
      if (opts.output) {
        const { formatDoc, pluginSummary } = await render();
        return ctx.out(formatDoc(all.map(pluginSummary), opts.output));
      }
      ctx.out(table(
        ["NAME", "VERSION", "SANDBOXES", "CREATED"],
        all.map((p) => [p.name, p.version, `${p.sandboxes.length}${p.deleting ? " (deleting)" : ""}`, shortTime(p.createdAt)]),
      ));
    });

  outputOption(plugin.command("versions").description("the published versions of one plugin, newest first").argument("<name>"))
    .action(async (name: string, opts: OutputOpts) => {
      const versions = sortVersions(await (await ctx.api()).listPlugins(name));
      if (!versions.length) throw new NotFoundError(`plugin ${name} not found`);
      if (opts.output) {
        const { formatDoc, pluginSummary } = await render();
        return ctx.out(formatDoc(versions.map(pluginSummary), opts.output));
      }
      ctx.out(table(
        ["VERSION", "SANDBOXES", "CREATED"],
        versions.map((p) => [p.version, String(p.sandboxes.length), shortTime(p.createdAt)]),
      ));
    });

  fileOptions(
    plugin.command("delete").alias("rm")
      .description("delete one version (NAME@VERSION), every version (NAME), or the version a file publishes")
      .argument("[ref]", "NAME or NAME@VERSION"),
    "plugin",
  ).action(async (ref: string | undefined, opts: FileOpts) => {
    nameOrFile(ref, opts.file, "plugin");
    const target = ref ?? (await publishedRef(await readName({ file: opts.file!, sets: opts.set, stdin: ctx.io.stdin })));
    const api = await ctx.api();
    const deleted = await api.deletePlugin(target);
    if (!deleted.length) throw new NotFoundError(`plugin ${target} not found`);
    for (const d of deleted) {
      // A version still in use goes with its last sandbox; say so rather than claim it is gone.
      const left = await api.getPlugin(d).catch((err: unknown) => {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      });
      if (left?.sandboxes.length) ctx.out(`plugin ${d} deleting: still used by ${left.sandboxes.join(", ")}; it goes once they are deleted\n`);
      else ctx.out(`plugin ${d} deleted\n`);
    }
  });
}

/** By name, newest version first. */
function sortVersions(plugins: pb.ResourcePluginVersion[]): pb.ResourcePluginVersion[] {
  return [...plugins].sort((a, b) => a.name.localeCompare(b.name) || compareVersionsDesc(a.version, b.version));
}

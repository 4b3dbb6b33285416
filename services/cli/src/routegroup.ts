// `eph routegroup …` (alias `rg`): apply, inspect and delete route groups, the routing
// contexts of every sandbox whose labels match.
import type * as pb from "@ephemera/proto";
import type { Command } from "commander";
import type { Context } from "./context.js";
import { UsageError } from "./errors.js";
import { readName, readRouteGroup } from "./files.js";
import { fileOptions, nameOrFile, outputOption } from "./options.js";
import type { OutputFormat } from "./render.js";
import { shortTime, table } from "./table.js";

const render = () => import("./render.js");

interface FileOpts { file?: string; set: string[] }
interface OutputOpts { output?: OutputFormat }

export function registerRouteGroup(program: Command, ctx: Context): void {
  const rg = program.command("routegroup").alias("rg").description("apply, inspect and delete route groups (a routing key for every sandbox whose labels match)");

  outputOption(fileOptions(rg.command("apply").description("create or update the route group a file describes (only match and endpoints may change)"), "route group")
    .option("--dry-run", "validate on the server and say what would change; change nothing"))
    .action(async (opts: FileOpts & OutputOpts & { dryRun?: boolean }) => {
      if (!opts.file) throw new UsageError("routegroup apply needs -f FILE");
      const group = await readRouteGroup({ file: opts.file, sets: opts.set, stdin: ctx.io.stdin });
      const res = await (await ctx.api()).applyRouteGroup(group, opts.dryRun ?? false);
      if (opts.output && res.routeGroup) {
        const { formatDoc, routeGroupDoc } = await render();
        return ctx.out(formatDoc(routeGroupDoc(res.routeGroup), opts.output));
      }
      const verb = res.created ? "created" : res.unchanged ? "unchanged" : "updated";
      if (opts.dryRun) {
        ctx.out(`route group ${group.name}: would ${res.unchanged ? "change nothing" : verb === "created" ? "be created" : "be updated"} (dry run: nothing written)\n`);
      } else {
        ctx.out(`route group ${group.name} ${verb} (routing key ${res.routeGroup?.routingKey})\n`);
      }
      for (const c of res.changes) ctx.out(`  change ${c.field}: ${c.oldJson} -> ${c.newJson}\n`);
      if (res.routeGroup) ctx.out(summary(res.routeGroup));
    });

  outputOption(rg.command("get").description("show a route group: its routing key, matched sandboxes, endpoints and conflicts").argument("<name>"))
    .action(async (name: string, opts: OutputOpts) => {
      const view = await (await ctx.api()).getRouteGroup(name);
      const { formatDoc, routeGroupDoc } = await render();
      ctx.out(formatDoc(routeGroupDoc(view), opts.output ?? "yaml"));
    });

  outputOption(rg.command("list").alias("ls").description("every route group and its status"))
    .action(async (opts: OutputOpts) => {
      const views = await (await ctx.api()).listRouteGroups();
      if (opts.output) {
        const { formatDoc, routeGroupDoc } = await render();
        return ctx.out(formatDoc(views.map(routeGroupDoc), opts.output));
      }
      ctx.out(table(["NAME", "READY", "STATUS", "SANDBOXES", "ROUTING KEY", "CREATED"], views.map((v) => [
        v.name, v.status?.ready ? "true" : "false", v.status?.reason ?? "", String(v.sandboxes.length), v.routingKey, shortTime(v.createdAt),
      ])));
    });

  fileOptions(rg.command("delete").alias("rm").description("delete a route group (its sandboxes stay)").argument("[name]"), "route group")
    .action(async (name: string | undefined, opts: FileOpts) => {
      nameOrFile(name, opts.file, "route group");
      const target = name ?? (await readName({ file: opts.file!, sets: opts.set, stdin: ctx.io.stdin }));
      await (await ctx.api()).deleteRouteGroup(target);
      ctx.out(`route group ${target} deleted\n`);
    });
}

/** What a person wants to see after an apply: the status, the sandboxes routed, the URLs. */
function summary(v: pb.RouteGroupView): string {
  const lines = [`  status: ${v.status?.reason ?? ""}${v.status?.message ? ` (${v.status.message})` : ""}`];
  for (const s of v.sandboxes) lines.push(`  sandbox ${s.name}${s.ready ? "" : " (not ready)"}${s.routed.length ? `: routes ${s.routed.join(", ")}` : ""}`);
  for (const e of v.endpoints) lines.push(`  ${e.name}: ${e.url} (target ${e.target})`);
  return `${lines.join("\n")}\n`;
}

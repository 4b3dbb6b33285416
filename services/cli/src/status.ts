// `eph sandbox get-status NAME`: one line, and an exit code a script can branch on (0 ready,
// 1 failed, 2 not found, 3 pending). Codes 1 to 3 mean something else for other commands,
// so when get-status cannot answer it exits 4 or 5, never a code that reads as an answer.
import { isNotFoundError } from "@ephemera/kit/errors";
import type * as pb from "@ephemera/proto";
import type { Command } from "commander";
import type { Context } from "./context.js";
import { EXIT_PERMISSION_DENIED, EXIT_UNAUTHENTICATED } from "./errors.js";
import { outputOption } from "./options.js";
import type { OutputFormat } from "./render.js";

/** The reasons of a sandbox whose forks could not be applied (or removed) on its cluster. */
export const FORK_FAILURES = ["BaselineNotFound", "PatchFailed", "ServiceNotFound", "OutputMissing", "OutputsTooLarge", "ForkUnavailable", "Rejected"];
/** Reasons that stay until someone acts (retry, apply, delete again): nothing more will happen by itself. */
export const FAILED_REASONS = ["ResourceFailed", "DeprovisionFailed", "RenderError", ...FORK_FAILURES];

export type Condition = "ready" | "failed" | "not-found" | "pending";

export const STATUS_EXIT: Readonly<Record<Condition, number>> = { ready: 0, failed: 1, "not-found": 2, pending: 3 };
/** get-status could not ask: the API refused the call (not authenticated, or permission denied). */
export const STATUS_EXIT_REFUSED = 4;
/** get-status could not ask for another reason: bad usage, the API unavailable, anything else. */
export const STATUS_EXIT_UNKNOWN = 5;

/** What a view says for get-status; anything not ready, failed or gone is still under way. */
export function condition(view: pb.SandboxView): Condition {
  const reason = view.status?.reason ?? "";
  if (view.status?.ready) return "ready";
  if (FAILED_REASONS.includes(reason)) return "failed";
  if (reason === "Deleted") return "not-found";
  return "pending";
}

export interface StatusDoc {
  name: string;
  ready: boolean;
  reason: string;
  message: string;
}

/** `ready`, or the reason and the message, on one line (a failure's message may hold several). */
export function statusLine(doc: StatusDoc): string {
  return doc.ready ? "ready\n" : `${doc.reason}: ${doc.message.trim().replace(/\s*\n\s*/g, " ")}\n`;
}

/** The exit code of a get-status that could not answer, from the one any other command would give. */
export function statusErrorExit(code: number): number {
  if (code === 0) return code;
  return code === EXIT_UNAUTHENTICATED || code === EXIT_PERMISSION_DENIED ? STATUS_EXIT_REFUSED : STATUS_EXIT_UNKNOWN;
}

export function registerGetStatus(sandbox: Command, ctx: Context): void {
  // Set before get-status parses its arguments, so its usage errors take its codes too.
  sandbox.hook("preSubcommand", (_sandbox, sub) => {
    if (sub.name() === "get-status") ctx.answering = true;
  });
  outputOption(
    sandbox.command("get-status")
      .description("print whether a sandbox is ready, in one line; exit 0 ready, 1 failed, 2 not found, 3 pending")
      .argument("<name>"),
  ).action(async (name: string, opts: { output?: OutputFormat }) => {
    let view: pb.SandboxView | undefined;
    try {
      view = await (await ctx.api()).getSandbox(name, false);
    } catch (err) {
      if (!isNotFoundError(err)) throw err;
    }
    const doc: StatusDoc = view
      ? { name, ready: view.status?.ready ?? false, reason: view.status?.reason ?? "", message: view.status?.message ?? "" }
      : { name, ready: false, reason: "NotFound", message: `sandbox ${name} not found` };
    ctx.out(opts.output ? (await import("./render.js")).formatDoc(doc, opts.output) : statusLine(doc));
    ctx.exitCode = STATUS_EXIT[view ? condition(view) : "not-found"];
  });
}

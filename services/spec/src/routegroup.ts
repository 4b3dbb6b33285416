// The route group file (Signadot's RouteGroup): its shape, the rules across its fields, and
// which sandboxes its `match` selects. Shared by `eph` and the sandbox service.
import type * as pb from "@ephemera/proto";
import picomatch from "picomatch";
import * as z from "zod";
import { CLUSTER_NAME, LABEL_NAME, MAX_BYTES, MAX_SPEC_BYTES, checkSpecSize } from "./names.js";
import { Endpoint, LABEL_RULE, maxBytes, named, text } from "./model.js";
import { fieldPath, type Path, type Violations } from "./violations.js";

/** How deep `all` and `any` may nest: deeper is never needed to say "this and (that or those)". */
export const MAX_MATCH_DEPTH = 4;

interface MatchDoc {
  label?: { key: string; value: string } | undefined;
  all?: MatchDoc[] | undefined;
  any?: MatchDoc[] | undefined;
}

const LabelMatch = z.strictObject({
  key: maxBytes(text("The sandbox label's key.", true), MAX_BYTES.labelKey, "label key"),
  value: maxBytes(text("A glob over the label's value: `*` any run of characters, `?` one character, `[abc]` one of them (e.g. `x-*`).", true),
    MAX_BYTES.labelValue, "label value"),
}).meta({ description: "Sandboxes with this label, its value matching the glob." });

const Match: z.ZodType<MatchDoc> = z.lazy(() => z.strictObject({
  label: LabelMatch.optional(),
  all: z.array(Match).optional().meta({ description: "Sandboxes every one of these matches selects." }),
  any: z.array(Match).optional().meta({ description: "Sandboxes at least one of these matches selects." }),
}).meta({ id: "Match", description: "Exactly one of `label`, `all` or `any`." }));

const RouteGroupSpec = z.strictObject({
  cluster: named("cluster", CLUSTER_NAME, MAX_BYTES.clusterName, "must contain only letters, digits, '_' and '-'",
    "The cluster whose sandboxes the route group may hold; it cannot change."),
  description: text("What the route group is for; it cannot change.", false).optional(),
  match: Match.meta({ description: "Which sandboxes of the cluster the route group holds, by their labels; may change." }),
  endpoints: z.array(Endpoint).optional().meta({ description: "Endpoints (preview URLs) under the route group's routing key; may change." }),
});

export const RouteGroupDoc = z.strictObject({
  name: named("route group name", LABEL_NAME, MAX_BYTES.sandboxName, LABEL_RULE, "Route group name; it cannot change."),
  spec: RouteGroupSpec,
}).meta({ title: "ephemera route group", description: "A routing context of every sandbox whose labels match, with its own routing key and endpoints." });

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** Rules across fields: endpoint names unique; each match exactly one kind, not empty, not too deep. */
export function checkRouteGroupRules(doc: unknown, out: Violations): void {
  const spec = isObj(doc) && isObj(doc.spec) ? doc.spec : {};
  checkSpecSize(spec, MAX_SPEC_BYTES.sandbox, "route group", out);
  const first = new Map<string, number>();
  (Array.isArray(spec.endpoints) ? spec.endpoints : []).forEach((e: unknown, i) => {
    const name = isObj(e) && typeof e.name === "string" && e.name !== "" ? e.name : undefined;
    if (name === undefined) return;
    const earlier = first.get(name);
    if (earlier !== undefined) {
      out.add(["spec", "endpoints", i, "name"], "duplicate-endpoint", `endpoint name "${name}" is already used at ${fieldPath(["spec", "endpoints", earlier])}`);
    } else first.set(name, i);
  });
  if (spec.match !== undefined) checkMatch(spec.match, ["spec", "match"], 1, out);
}

function checkMatch(match: unknown, at: Path, depth: number, out: Violations): void {
  if (!isObj(match)) return;
  const given = (["label", "all", "any"] as const).filter((k) => match[k] !== undefined);
  // A misspelt kind (`lable`) is the unknown field's report alone.
  const misspelt = Object.keys(match).some((k) => k !== "label" && k !== "all" && k !== "any");
  if (given.length > 1 || (given.length === 0 && !misspelt)) {
    out.add(at, "match-one", given.length === 0
      ? "a match needs one of label, all or any"
      : `a match has ${given.join(" and ")}: give exactly one (nest them under all or any to combine)`);
  }
  for (const kind of ["all", "any"] as const) {
    const list = match[kind];
    if (!Array.isArray(list)) continue;
    if (list.length === 0) out.add([...at, kind], "match-one", `${kind} lists no match: it would select ${kind === "all" ? "every sandbox" : "none"}`);
    if (depth > MAX_MATCH_DEPTH && list.length > 0) {
      out.add([...at, kind], "match-depth", `matches nest at most ${MAX_MATCH_DEPTH} levels deep`);
      continue;
    }
    list.forEach((m, i) => checkMatch(m, [...at, kind, i], depth + 1, out));
  }
}

/**
 * Pure: whether a sandbox with these labels is selected by `match`. A label's value is a
 * glob (picomatch, with `/` an ordinary character and no braces or extglobs: label values
 * are not paths); `all` needs every entry, `any` one of them.
 */
export function routeGroupMatches(match: pb.RouteGroupMatch | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (!match) return false;
  if (match.label) {
    const value = labels[match.label.key];
    return value !== undefined && globMatches(match.label.value, value);
  }
  if (match.all.length) return match.all.every((m) => routeGroupMatches(m, labels));
  if (match.any.length) return match.any.some((m) => routeGroupMatches(m, labels));
  return false;
}

const compiled = new Map<string, (value: string) => boolean>();
/** Stands for `/` on both sides: picomatch treats `/` as a path separator that `*` does not cross. */
const SLASH = "\u2215";
const noSlash = (text: string) => text.replaceAll("/", SLASH);

function globMatches(glob: string, value: string): boolean {
  let test = compiled.get(glob);
  if (!test) {
    test = picomatch(noSlash(glob), { dot: true, nobrace: true, noextglob: true, noglobstar: true, nonegate: true });
    // Bounded: match globs are few, but a client could send many.
    if (compiled.size >= 1000) compiled.clear();
    compiled.set(glob, test);
  }
  return test(noSlash(value));
}

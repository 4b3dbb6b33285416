// The spec package's invalid files, cut down to those a gRPC request can carry.
//
// Left out, because they cannot cross the wire: unknown or misspelt fields (fromJSON drops
// them: rule `unknown-field`), values of the wrong JSON type (rule `type`: fromJSON coerces
// `create: "provision"`, `valueFromSandbox: "yes"`, labels as a list and null or list
// params to the field's proto type), documents the client cannot encode at all
// (retries of 1.5 or -1 as a uint32), and strings UTF-8 cannot carry (rule `utf8`: the
// encoder writes a lone surrogate as U+FFFD; bytes that are not UTF-8 are refused on the
// wire, tested in api.int.spec.ts).
import * as pb from "@ephemera/proto";
import * as table from "../../spec/src/invalid.testkit.js";

export { baseJob, baseJobRunnerGroup, basePlugin, baseRouteGroup, baseSandbox, type Doc, type Row } from "../../spec/src/invalid.testkit.js";

/** Rules no request can break, for the reasons above. */
export const NOT_ON_THE_WIRE: readonly string[] = ["unknown-field", "type", "utf8"];

const encodable = (message: { fromJSON(o: unknown): unknown; encode(m: never): unknown }, doc: table.Doc) => {
  try {
    message.encode(message.fromJSON(doc) as never);
    return true;
  } catch {
    return false;
  }
};

const onTheWire = (rows: table.Row[], base: () => table.Doc, message: Parameters<typeof encodable>[0]) =>
  rows.filter(([, edit, , rule]) => {
    if (NOT_ON_THE_WIRE.includes(rule)) return false;
    const doc = base();
    edit(doc);
    return encodable(message, doc);
  });

export const pluginRows = onTheWire(table.pluginRows, table.basePlugin, pb.ResourcePlugin);
export const sandboxRows = onTheWire(table.sandboxRows, table.baseSandbox, pb.Sandbox);
/** An empty `all: []` is no list at all in proto: on the wire it is a match without a kind (another row). */
export const routeGroupRows = onTheWire(table.routeGroupRows, table.baseRouteGroup, pb.RouteGroup).filter(([what]) => what !== "an empty all");

/**
 * A job runner group as a client sends it: `pod_template` is the template's JSON text (the
 * CLI writes the file's object so), everything else as written.
 */
export function wireJobRunnerGroup(doc: table.Doc): table.Doc {
  const template = doc["spec"]?.podTemplate;
  if (template === undefined || typeof template === "string") return doc;
  return { ...doc, spec: { ...doc["spec"], podTemplate: JSON.stringify(template) } };
}

/**
 * On the wire `desiredPods: 1.5` is a uint32 of 1 and `0` is no value (the default, 1): valid
 * groups, not those rows' mistakes.
 */
export const jobRunnerGroupRows = table.jobRunnerGroupRows.filter(([what, edit, , rule]) => {
  if (NOT_ON_THE_WIRE.includes(rule) || what === "half a pod" || what === "no pods") return false;
  const doc = table.baseJobRunnerGroup();
  edit(doc);
  return encodable(pb.JobRunnerGroup, wireJobRunnerGroup(doc));
});
export const jobRows = onTheWire(table.jobRows, table.baseJob, pb.Job);

// docs/events.md is the public catalogue of the event log (outside subscribers read the
// stream by it): these tests hold it to the types, aggregates and payload fields the code has.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { Aggregates, EVENT_TYPES, ev, isEventType } from "./index.js";

const PAGE = join(__dirname, "..", "..", "..", "docs", "events.md");

interface Row { type: string; aggregate: string; message: string; fields: string[] }

/**
 * The catalogue's rows: `| \`type\` | \`aggregate\` (id) | writers | \`Message {a, b[] {…}}\`: … |`;
 * `fields` are the payload's top-level field names as the row lists them.
 */
function catalogueRows(page: string): Row[] {
  return page.split("\n").filter((line) => line.startsWith("| `ephemera.")).map((line) => {
    const [typeCell = "", aggregateCell = "", , ...rest] = line.split(" | ");
    const payload = /`(\w+) \{(.*?)\}`/.exec(rest.join(" | "));
    return {
      type: /`([^`]+)`/.exec(typeCell)?.[1] ?? "",
      aggregate: /`([^`]+)`/.exec(aggregateCell)?.[1] ?? "",
      message: payload?.[1] ?? "",
      fields: payload ? topLevelFields(payload[2] ?? "") : [],
    };
  });
}

/** `a, b[] {c, d}, e?` → a, b, e: what is inside nested braces describes a field's own message. */
function topLevelFields(list: string): string[] {
  let depth = 0;
  let top = "";
  for (const ch of list) {
    if (ch === "{") depth++;
    else if (ch === "}") depth--;
    else if (depth === 0) top += ch;
  }
  return top.split(",").map((f) => f.trim().replace(/(\[\]|\?)$/, "")).filter(Boolean);
}

/** Every event type the page names anywhere, rows or prose. */
function mentionedTypes(page: string): string[] {
  return [...new Set(page.match(/ephemera\.[a-z_]+\.[a-z_]+\.v\d+/g) ?? [])];
}

const codecs = pb as unknown as Record<string, { fromPartial?: (o: object) => object } | undefined>;
const sorted = (xs: string[]) => [...xs].sort();

describe("the event catalogue (docs/events.md)", () => {
  const page = readFileSync(PAGE, "utf8");
  const rows = catalogueRows(page);

  it("has one row for every event type the code registers", () => {
    const documented = rows.map((r) => r.type);
    expect(EVENT_TYPES.filter((t) => !documented.includes(t))).toEqual([]);
    expect(documented.filter((t, i) => documented.indexOf(t) !== i)).toEqual([]);
  });

  it("names no event type the code does not know, in its rows or its prose", () => {
    expect(mentionedTypes(page).filter((t) => !isEventType(t))).toEqual([]);
  });

  it("gives each type an aggregate of the code and its payload message with the message's fields, no more, no fewer", () => {
    const aggregates: string[] = Object.values(Aggregates);
    const wrong = rows.flatMap((r) => {
      const problems: string[] = [];
      if (!aggregates.includes(r.aggregate)) problems.push(`aggregate ${r.aggregate || "(none)"} is not one of the code's`);
      const codec = codecs[r.message];
      if (!codec?.fromPartial) return [...problems, `payload ${r.message || "(none)"} is not a message of events.proto`];
      const declared = sorted(Object.keys(codec.fromPartial({})));
      if (isEventType(r.type) && JSON.stringify(sorted(Object.keys(ev(r.type).data as object))) !== JSON.stringify(declared)) {
        problems.push(`payload ${r.message} is not the type's message`);
      }
      if (JSON.stringify(sorted(r.fields)) !== JSON.stringify(declared)) problems.push(`fields {${r.fields.join(", ")}}, the message has {${declared.join(", ")}}`);
      return problems.map((p) => `${r.type}: ${p}`);
    });
    expect(wrong).toEqual([]);
  });

  it("would catch a type left out, a type the code lacks and a field that is not there", () => {
    const row = (type: string, payload: string) => `| \`${type}\` | \`sandbox\` | sandbox | \`${payload}\`: text |`;
    const broken = [
      row("ephemera.sandbox.ready.v1", "SandboxReady {}"),
      row("ephemera.sandbox.renamed.v1", "SandboxReady {}"),
      row("ephemera.sandbox.deleted.v1", "SandboxDeleted {forced, reason[] {a, b}}"),
    ].join("\n");
    expect(catalogueRows(broken)).toEqual([
      { type: "ephemera.sandbox.ready.v1", aggregate: "sandbox", message: "SandboxReady", fields: [] },
      { type: "ephemera.sandbox.renamed.v1", aggregate: "sandbox", message: "SandboxReady", fields: [] },
      { type: "ephemera.sandbox.deleted.v1", aggregate: "sandbox", message: "SandboxDeleted", fields: ["forced", "reason"] },
    ]);
    expect(EVENT_TYPES.filter((t) => !catalogueRows(broken).some((r) => r.type === t))).toContain("ephemera.sandbox.created.v1");
    expect(mentionedTypes(broken).filter((t) => !isEventType(t))).toEqual(["ephemera.sandbox.renamed.v1"]);
  });
});

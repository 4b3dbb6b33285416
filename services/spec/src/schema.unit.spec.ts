// The JSON Schemas in docs/schemas/ are generated from the model and must not go stale:
// `pnpm --filter @ephemera/spec schemas` rewrites them.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jsonSchema, SCHEMA_KINDS } from "./schema.js";

const DOCS = join(__dirname, "..", "..", "..", "docs", "schemas");

describe.each(SCHEMA_KINDS)("the %s JSON Schema", (kind) => {
  const file = join(DOCS, `${kind}.schema.json`);
  const generated = `${JSON.stringify(jsonSchema(kind), null, 2)}\n`;

  it("in docs/schemas is up to date", () => {
    if (process.env.SPEC_WRITE_SCHEMAS === "1") writeFileSync(file, generated);
    const committed = readFileSync(file, "utf8");
    if (committed !== generated) {
      throw new Error(`${file} is stale: run \`pnpm --filter @ephemera/spec schemas\` and commit it`);
    }
  });

  it("rejects unknown fields and requires name and spec", () => {
    const schema = jsonSchema(kind) as { required: string[]; additionalProperties: boolean; $schema: string };
    expect(schema.$schema).toBe("http://json-schema.org/draft-07/schema#");
    // A job's name is generated at submit.
    expect(schema.required).toEqual(kind === "job" ? ["spec"] : ["name", "spec"]);
    expect(schema.additionalProperties).toBe(false);
  });
});

it("marks ephemera's additions", () => {
  const step = (jsonSchema("plugin") as { definitions: { Step: { properties: Record<string, { description: string }> } } }).definitions.Step;
  expect(step.properties.timeout?.description).toMatch(/^\(ephemera addition\)/);
  expect(step.properties.retries?.description).toMatch(/^\(ephemera addition\)/);
  expect(step.properties.script?.description).not.toMatch(/ephemera addition/);
});

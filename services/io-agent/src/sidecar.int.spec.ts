import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collectOutputs } from "./sidecar.js";

describe("sidecar output collection (on a real filesystem)", () => {
  let dir: string;
  beforeEach(async () => { dir = await mkdtemp(join(tmpdir(), "sidecar-")); });
  afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

  it("reads every declared output", async () => {
    await writeFile(join(dir, "host"), "db-1");
    await writeFile(join(dir, "port"), "");
    const r = await collectOutputs([{ name: "host", path: join(dir, "host") }, { name: "port", path: join(dir, "port") }]);
    expect(r).toEqual({ ok: true, values: [{ name: "host", value: Buffer.from("db-1"), size: 4, sha256: "" }, { name: "port", value: Buffer.alloc(0), size: 0, sha256: "" }] });
  });

  it("fails on a missing output, naming it", async () => {
    const r = await collectOutputs([{ name: "host", path: join(dir, "host") }]);
    expect(r).toMatchObject({ ok: false, reason: "OutputMissing", message: expect.stringContaining('output "host"') });
  });

  it("fails on an output over the limit, naming it and its size", async () => {
    await writeFile(join(dir, "big"), Buffer.alloc(11));
    const r = await collectOutputs([{ name: "big", path: join(dir, "big") }], 10);
    expect(r).toMatchObject({ ok: false, reason: "OutputTooLarge", message: expect.stringContaining("is 11 bytes, over the 10-byte limit") });
  });
});

// The built `eph` as a process, given a --set value that is not UTF-8 by the shell: refused
// with exit 2 before any call (the API address here answers nothing), not sent as U+FFFD.
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../../test/support/stack.js";

const MAIN = join(__dirname, "..", "dist", "bundle", "main.js");

it("eph refuses an argument that is not UTF-8 with exit 2, naming it and sending nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "eph-argv-"));
  const file = join(dir, "plugin.yaml");
  writeFileSync(file, "name: db\nspec:\n  description: \"@{v}\"\n  runner: {image: alpine:3}\n  create:\n  - {name: a, script: \"#!/bin/sh\\n\"}\n");
  // Only a shell can hand a process bytes that are not UTF-8: Node encodes its own arguments.
  const r = spawnSync("/bin/sh", ["-c", `exec "$0" "$1" plugin apply -f "$2" --set "v=$(printf 'a\\303(')"`, process.execPath, MAIN, file], {
    env: { ...process.env, EPHEMERA_API: `127.0.0.1:${await freePort()}` },
    encoding: "utf8",
  });
  expect(r.stderr).toBe("error: argument 6 (after --set) is not valid UTF-8 at byte 3; arguments are UTF-8 and eph rewrites none\n");
  expect(r.status).toBe(2);
});

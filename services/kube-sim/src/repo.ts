// The repository root, found by walking up to the directory holding this package (the
// CommonJS test build cannot use import.meta, so the start is a path: the cwd, or the
// entry script's own location in main.ts).
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

export function findRepoRoot(from: string = process.cwd()): string {
  for (let dir = resolve(from); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "services", "kube-sim", "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no ephemera repository above ${from}`);
  }
}

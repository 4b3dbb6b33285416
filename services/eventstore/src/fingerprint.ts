// The fingerprint of the code a service runs: what a feed's snapshot is tied to.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

/**
 * A SHA-256 of the JavaScript of the package whose script is running (`main`, by default the
 * process's) and of every `@ephemera/*` package it holds: the folds and the decoders they
 * use. Whether a change alters a fold is not known without running it, so any change of
 * that code makes a new fingerprint, and a service of new code replays the stream once
 * instead of restoring a state the old code folded. Third-party packages are left out:
 * their versions are pinned by the lockfile, and hashing them would cost seconds.
 */
export function codeFingerprint(main: string | undefined = process.argv[1]): string {
  const hash = createHash("sha256");
  const root = main ? packageRoot(dirname(main)) : undefined;
  if (!root) return hash.digest("hex");
  const dirs = [join(root, "dist")];
  const scope = join(root, "node_modules", "@ephemera");
  if (existsSync(scope)) for (const name of readdirSync(scope).sort()) dirs.push(join(scope, name, "dist"));
  for (const dir of dirs) {
    for (const file of scripts(dir)) hash.update(relative(root, file)).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex");
}

function packageRoot(dir: string): string | undefined {
  for (let d = dir; ; d = dirname(d)) {
    const manifest = join(d, "package.json");
    if (existsSync(manifest)) {
      const name = (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name ?? "";
      return name.startsWith("@ephemera/") ? d : undefined;
    }
    if (dirname(d) === d) return undefined;
  }
}

function scripts(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...scripts(path));
    else if (name.endsWith(".js") || name.endsWith(".cjs")) out.push(path);
  }
  return out;
}

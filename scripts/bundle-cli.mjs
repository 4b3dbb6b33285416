// Bundles eph, the command line, into services/cli/dist/bundle/ (main.js and the chunks
// its commands load on demand): one file per command path instead of hundreds of module
// resolutions, so a command starts in about half the time (`node test/bench/cli-startup.mjs`).
// Built from the TypeScript sources and the generated protobuf code; `pnpm eph` and the
// tests run it.
//   node scripts/bundle-cli.mjs
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const OUTDIR = join(root, "services/cli/dist/bundle");

/** The workspace packages, from their sources (subpath entries included: @ephemera/kit/client). */
const workspace = {
  name: "workspace-sources",
  setup(build) {
    build.onResolve({ filter: /^@ephemera\// }, (args) => {
      const [, pkg, sub] = /^@ephemera\/([^/]+)(?:\/(.+))?$/.exec(args.path);
      return { path: join(root, "services", pkg, "src", `${sub ?? "index"}.ts`) };
    });
  },
};

export async function bundleCli() {
  // Chunk names carry content hashes: the last build's would pile up.
  rmSync(OUTDIR, { recursive: true, force: true });
  await esbuild.build({
    entryPoints: { main: join(root, "services/cli/src/main.ts") },
    outdir: OUTDIR,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    minify: true,
    legalComments: "none",
    logLevel: "warning",
    // CommonJS dependencies (grpc-js) call require(): give every chunk one.
    banner: { js: 'import { createRequire as __ephCreateRequire } from "node:module"; const require = __ephCreateRequire(import.meta.url);' },
    plugins: [workspace],
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await bundleCli();

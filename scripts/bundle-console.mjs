// Bundles the web console's single-page app (services/console/web) into services/console/dist/web:
// index.html and assets/app-<hash>.js, app-<hash>.css (names carry a hash of their content, so the
// server may let browsers keep them for a year), each also written as .gz and .br, which the server
// sends as they are to a browser that accepts them.
//   node scripts/bundle-console.mjs [--analyze]
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants as zlib, gzipSync } from "node:zlib";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const web = join(root, "services/console/web");
export const OUTDIR = join(root, "services/console/dist/web");

/** No inline script: the server's Content-Security-Policy allows scripts from 'self' only. */
function indexHtml(script, style) {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>ephemera</title>
<link rel="stylesheet" href="/assets/${style}">
<script type="module" src="/assets/${script}"></script>
</head>
<body>
<div id="root"></div>
<noscript>The ephemera console needs JavaScript.</noscript>
</body>
</html>
`;
}

function compress(file, bytes) {
  const gzip = gzipSync(bytes, { level: 9 });
  const brotli = brotliCompressSync(bytes, {
    params: { [zlib.BROTLI_PARAM_QUALITY]: 11, [zlib.BROTLI_PARAM_SIZE_HINT]: bytes.length },
  });
  writeFileSync(`${file}.gz`, gzip);
  writeFileSync(`${file}.br`, brotli);
  return { raw: bytes.length, gzip: gzip.length, brotli: brotli.length };
}

export async function bundleConsole({ analyze = false, outdir = OUTDIR } = {}) {
  const assets = join(outdir, "assets");
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(assets, { recursive: true });
  const result = await esbuild.build({
    entryPoints: { app: join(web, "src/main.tsx") },
    outdir: assets,
    entryNames: "[name]-[hash]",
    bundle: true,
    platform: "browser",
    format: "esm",
    target: ["es2022", "chrome110", "firefox115", "safari16"],
    jsx: "automatic",
    minify: true,
    legalComments: "none",
    define: { "process.env.NODE_ENV": '"production"' },
    loader: { ".svg": "dataurl" },
    metafile: true,
    write: true,
    logLevel: "warning",
  });
  const sizes = {};
  for (const path of Object.keys(result.metafile.outputs)) {
    const file = join(root, path);
    sizes[basename(file)] = compress(file, readFileSync(file));
  }
  const names = readdirSync(assets);
  const script = names.find((n) => /^app-[A-Z0-9]+\.js$/.test(n));
  const style = names.find((n) => /^app-[A-Z0-9]+\.css$/.test(n));
  if (!script || !style) throw new Error(`the console bundle has no app-<hash>.js and .css in ${assets}: ${names.join(", ")}`);
  writeFileSync(join(outdir, "index.html"), indexHtml(script, style));
  if (analyze) process.stdout.write(await esbuild.analyzeMetafile(result.metafile));
  return { outdir, sizes };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { outdir, sizes } = await bundleConsole({ analyze: process.argv.includes("--analyze") });
  const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
  for (const [name, s] of Object.entries(sizes)) {
    process.stdout.write(`${outdir.slice(root.length + 1)}/assets/${name} (${kib(s.raw)}, gzip ${kib(s.gzip)}, brotli ${kib(s.brotli)})\n`);
  }
}

// Bundles ephemera-agent (the init and sidecar containers of a runner pod, the job agent of a job runner group's pod) into one file,
// services/io-agent/dist/agent-bundle.cjs, run by dist/agent.cjs with V8's code cache of it
// (agent-bundle.cache), for the agent image: it starts in every step's pod, so
// it loads only what the agent uses. Built from the TypeScript sources (and the generated
// protobuf code, `pnpm gen`), so it needs no tsc output.
//   node scripts/bundle-agent.mjs [--analyze] [--no-code-cache] [--outfile PATH/agent.cjs]
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const agent = join(root, "services/io-agent");
const kit = join(root, "services/kit");

/** kit's entry or subpath export (`@ephemera/kit/client`), at its TypeScript source rather than dist. */
function kitSource(specifier) {
  const exports = JSON.parse(readFileSync(join(kit, "package.json"), "utf8")).exports;
  const entry = exports[`.${specifier.slice("@ephemera/kit".length)}`];
  const target = typeof entry === "string" ? entry : entry?.default;
  if (!target) throw new Error(`@ephemera/kit exports no ${specifier}`);
  return join(kit, target.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts"));
}
const protoGen = join(root, "services/proto/src/gen");
export const OUTFILE = join(agent, "dist/agent.cjs");

/**
 * The server half of @ephemera/kit (health, reflection, logging, signing, ids): the agent
 * calls none of it, and kit's one entry imports it all. Resolved side-effect free, so
 * esbuild drops each one nothing uses; the build fails if one is still in the bundle.
 */
const SERVER_ONLY = ["@grpc/reflection", "grpc-health-check", "@grpc/proto-loader", "protobufjs", "pino", "jose", "ulid"];

/**
 * The wire types the agent uses: the IOContext and JobAgent services and google.rpc error details (how
 * kit reads a refusal's field violations). @ephemera/proto's entry also builds the public
 * API's clients at load, which the agent has no use for. descriptorSetBase64 is only
 * named (by kit's server) and is dropped with it.
 */
const PROTO_LEAN = `
export * from "./ephemera/v1/iocontext.js";
export * from "./ephemera/v1/jobs.js";
export { BadRequest, BadRequest_FieldViolation, Status as RpcStatus } from "./google/rpc/error_details.js";
export { Any } from "./google/protobuf/any.js";
export { descriptorSetBase64 } from "./descriptors.js";
`;

/** grpc-js loads @grpc/proto-loader (and protobufjs) only to serve channelz and ORCA, both server-side. */
const NO_PROTO_LOADER = `module.exports = { loadSync() { throw new Error("@grpc/proto-loader is not in the ephemera-agent bundle"); } };`;

const lean = {
  name: "agent-lean",
  setup(build) {
    build.onResolve({ filter: /^@grpc\/proto-loader$/ }, (args) =>
      (/[\\/]@grpc[\\/]grpc-js[\\/]/.test(args.importer) ? { path: "no-proto-loader", namespace: "agent-lean" } : undefined));
    build.onLoad({ filter: /^no-proto-loader$/, namespace: "agent-lean" }, () => ({ contents: NO_PROTO_LOADER, loader: "js" }));
    build.onResolve({ filter: /^@ephemera\/kit(\/.*)?$/ }, (args) => ({ path: kitSource(args.path) }));
    build.onResolve({ filter: /^@ephemera\/proto$/ }, () => ({ path: "proto-lean", namespace: "agent-lean" }));
    build.onLoad({ filter: /^proto-lean$/, namespace: "agent-lean" }, () => ({ contents: PROTO_LEAN, resolveDir: protoGen, loader: "js" }));
    const serverOnly = new RegExp(`^(${SERVER_ONLY.map((p) => p.replace(/[/.]/g, "\\$&")).join("|")})$`);
    build.onResolve({ filter: serverOnly }, async (args) => {
      if (args.pluginData === "agent-lean") return undefined;
      const resolved = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "agent-lean" });
      if (resolved.errors.length) return { errors: resolved.errors };
      return { path: resolved.path, sideEffects: false };
    });
  },
};

/**
 * agent.cjs itself: loads the bundle with V8's code cache of it, which saves compiling
 * ~320 KB of JavaScript at every start (a third of the agent's start-up over bare Node
 * here). Node 20 has no compile cache for modules (22's module.enableCompileCache), so
 * this does it for the one file. A cache made by another Node build is rejected by V8
 * and the bundle compiles as without one: the image makes its own (docs/agent.md).
 */
const LOADER = `"use strict";
// ephemera-agent (scripts/bundle-agent.mjs): runs agent-bundle.cjs with V8's code cache of it,
// agent-bundle.cache, written by EPHEMERA_AGENT_WRITE_CODE_CACHE=1 node agent.cjs init --check.
const { readFileSync, renameSync, writeFileSync } = require("node:fs");
const { join } = require("node:path");
const { Script } = require("node:vm");
const file = join(__dirname, "agent-bundle.cjs");
const cacheFile = join(__dirname, "agent-bundle.cache");
let cachedData;
try { cachedData = readFileSync(cacheFile); } catch { cachedData = undefined; }
const source = readFileSync(file, "utf8");
const script = new Script("(function (exports, require, module, __filename, __dirname) {" + source + "\\n})", { filename: file, cachedData });
if (process.env.EPHEMERA_AGENT_WRITE_CODE_CACHE === "1") {
  // On exit: the cache then holds the functions the run compiled, not only the top level.
  process.on("exit", () => { writeFileSync(cacheFile + ".tmp", script.createCachedData()); renameSync(cacheFile + ".tmp", cacheFile); });
}
const bundle = { exports: {} };
script.runInThisContext()(bundle.exports, require, bundle, file, __dirname);
`;

/** Runs the agent once as the loader's cache writer: a no-op that loads and reads its configuration. */
function writeCodeCache(loader) {
  const r = spawnSync(process.execPath, [loader, "init", "--check"], {
    encoding: "utf8",
    env: {
      PATH: process.env.PATH, EPHEMERA_AGENT_WRITE_CODE_CACHE: "1",
      EPHEMERA_RUN_ID: "code-cache", EPHEMERA_TOKEN: "code-cache", EPHEMERA_IOCONTEXT: "127.0.0.1:1",
    },
  });
  if (r.status !== 0) throw new Error(`the agent bundle does not run (${loader} init --check exited ${r.status}): ${r.stderr}`);
}

export async function bundleAgent({ analyze = false, outfile = OUTFILE, codeCache = true } = {}) {
  const bundleFile = join(dirname(outfile), "agent-bundle.cjs");
  rmSync(join(dirname(outfile), "agent-bundle.cache"), { force: true });
  const result = await esbuild.build({
    entryPoints: [join(agent, "src/pod/main.ts")],
    outfile: bundleFile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    minify: true,
    legalComments: "none",
    metafile: true,
    logLevel: "warning",
    plugins: [lean],
  });
  // Every file esbuild read is listed in metafile.inputs; those in the output have bytes in it.
  const output = Object.values(result.metafile.outputs)[0];
  const inputs = Object.entries(output.inputs).filter(([, v]) => v.bytesInOutput > 0).map(([k]) => k);
  const leaked = SERVER_ONLY.filter((p) => inputs.some((i) => i.includes(`/node_modules/${p}/`)));
  if (leaked.length) throw new Error(`the agent bundle pulls in ${leaked.join(", ")}: something it runs uses the server half of kit`);
  if (analyze) process.stdout.write(await esbuild.analyzeMetafile(result.metafile));
  writeFileSync(outfile, LOADER);
  if (codeCache) writeCodeCache(outfile);
  return { outfile, bytes: statSync(bundleFile).size };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--outfile");
  const { outfile, bytes } = await bundleAgent({
    analyze: process.argv.includes("--analyze"),
    codeCache: !process.argv.includes("--no-code-cache"),
    ...(at > 0 ? { outfile: process.argv[at + 1] } : {}),
  });
  process.stdout.write(`${outfile.startsWith(root) ? outfile.slice(root.length + 1) : outfile} (agent-bundle.cjs: ${Math.round(bytes / 1024)} KiB)\n`);
}

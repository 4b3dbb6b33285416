// Bundles ephemera-agent (the init and sidecar containers of a runner pod) into one file,
// services/io-agent/dist/agent.cjs, for the agent image: it starts in every step's pod, so
// it loads only what the agent uses. Built from the TypeScript sources (and the generated
// protobuf code, `pnpm gen`), so it needs no tsc output.
//   node scripts/bundle-agent.mjs [--analyze] [--outfile PATH]
import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const agent = join(root, "services/io-agent");
const kitEntry = join(root, "services/kit/src/index.ts");
const protoGen = join(root, "services/proto/src/gen");
export const OUTFILE = join(agent, "dist/agent.cjs");

/**
 * The server half of @ephemera/kit (health, reflection, logging, signing, ids): the agent
 * calls none of it, and kit's one entry imports it all. Resolved side-effect free, so
 * esbuild drops each one nothing uses; the build fails if one is still in the bundle.
 */
const SERVER_ONLY = ["@grpc/reflection", "grpc-health-check", "@grpc/proto-loader", "protobufjs", "pino", "jose", "ulid"];

/**
 * The wire types the agent uses: the IOContext service and google.rpc error details (how
 * kit reads a refusal's field violations). @ephemera/proto's entry also builds the public
 * API's clients at load, which the agent has no use for. descriptorSetBase64 is only
 * named (by kit's server) and is dropped with it.
 */
const PROTO_LEAN = `
export * from "./ephemera/v1/iocontext.js";
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
    build.onResolve({ filter: /^@ephemera\/kit$/ }, () => ({ path: kitEntry }));
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

export async function bundleAgent({ analyze = false, outfile = OUTFILE } = {}) {
  const result = await esbuild.build({
    entryPoints: [join(agent, "src/pod/main.ts")],
    outfile,
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
  return { outfile, bytes: statSync(outfile).size };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--outfile");
  const { outfile, bytes } = await bundleAgent({ analyze: process.argv.includes("--analyze"), ...(at > 0 ? { outfile: process.argv[at + 1] } : {}) });
  process.stdout.write(`${outfile.startsWith(root) ? outfile.slice(root.length + 1) : outfile}: ${Math.round(bytes / 1024)} KiB\n`);
}

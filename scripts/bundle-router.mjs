// Bundles ephemera-router (the routing sidecar) into one file, services/router/dist/router.cjs,
// for the image ephemera/router, where it runs as `node /router/router.cjs`: no node_modules
// in the image. Built from the TypeScript sources and the generated protobuf code (`pnpm gen`).
//   node scripts/bundle-router.mjs [--analyze]
import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const protoGen = join(root, "services/proto/src/gen");
export const OUTFILE = join(root, "services/router/dist/router.cjs");

/**
 * The server half of @ephemera/kit (health, reflection, signing, ids): the router calls none
 * of it, and kit's entry imports it all. Resolved side-effect free, so esbuild drops what
 * nothing uses; the build fails if one is still in the bundle.
 */
const SERVER_ONLY = ["@grpc/reflection", "grpc-health-check", "@grpc/proto-loader", "protobufjs", "jose", "ulid"];

/** The wire types the router uses: the Routes service, and the error details kit reads. The full entry builds every API client at load. */
const PROTO_LEAN = `
export * as routes from "./routes/routes.js";
export { BadRequest, BadRequest_FieldViolation, Status as RpcStatus } from "./google/rpc/error_details.js";
export { Any } from "./google/protobuf/any.js";
export { descriptorSetBase64 } from "./descriptors.js";
`;

/** grpc-js loads @grpc/proto-loader only to serve channelz and ORCA, both server-side. */
const NO_PROTO_LOADER = `module.exports = { loadSync() { throw new Error("@grpc/proto-loader is not in the ephemera-router bundle"); } };`;

const lean = {
  name: "router-lean",
  setup(build) {
    build.onResolve({ filter: /^@grpc\/proto-loader$/ }, (args) =>
      (/[\\/]@grpc[\\/]grpc-js[\\/]/.test(args.importer) ? { path: "no-proto-loader", namespace: "router-lean" } : undefined));
    build.onLoad({ filter: /^no-proto-loader$/, namespace: "router-lean" }, () => ({ contents: NO_PROTO_LOADER, loader: "js" }));
    build.onResolve({ filter: /^@ephemera\/proto$/ }, () => ({ path: "proto-lean", namespace: "router-lean" }));
    build.onLoad({ filter: /^proto-lean$/, namespace: "router-lean" }, () => ({ contents: PROTO_LEAN, resolveDir: protoGen, loader: "js" }));
    // Workspace packages from their sources, subpath entries included (@ephemera/kit/client).
    build.onResolve({ filter: /^@ephemera\// }, (args) => {
      const [, pkg, sub] = /^@ephemera\/([^/]+)(?:\/(.+))?$/.exec(args.path);
      return { path: join(root, "services", pkg, "src", `${sub ?? "index"}.ts`) };
    });
    const serverOnly = new RegExp(`^(${SERVER_ONLY.map((p) => p.replace(/[/.]/g, "\\$&")).join("|")})$`);
    build.onResolve({ filter: serverOnly }, async (args) => {
      if (args.pluginData === "router-lean") return undefined;
      const resolved = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "router-lean" });
      if (resolved.errors.length) return { errors: resolved.errors };
      return { path: resolved.path, sideEffects: false };
    });
  },
};

export async function bundleRouter({ analyze = false, outfile = OUTFILE } = {}) {
  const result = await esbuild.build({
    entryPoints: [join(root, "services/router/src/main.ts")],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    minify: true,
    // Errors keep their class names in the logs (RouterConfigError, not a minified one).
    keepNames: true,
    legalComments: "none",
    metafile: true,
    logLevel: "warning",
    plugins: [lean],
  });
  const output = Object.values(result.metafile.outputs)[0];
  const inputs = Object.entries(output.inputs).filter(([, v]) => v.bytesInOutput > 0).map(([k]) => k);
  const leaked = SERVER_ONLY.filter((p) => inputs.some((i) => i.includes(`/node_modules/${p}/`)));
  if (leaked.length) throw new Error(`the router bundle pulls in ${leaked.join(", ")}: something it runs uses the server half of kit`);
  if (analyze) process.stdout.write(await esbuild.analyzeMetafile(result.metafile));
  return { outfile, bytes: statSync(outfile).size };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { outfile, bytes } = await bundleRouter({ analyze: process.argv.includes("--analyze") });
  process.stdout.write(`${outfile.slice(root.length + 1)} (${Math.round(bytes / 1024)} KiB)\n`);
}

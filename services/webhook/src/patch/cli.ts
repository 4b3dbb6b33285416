// `node services/webhook/dist/patch.js [options] FILE|-`: the manifests with the router
// injected, on stdout for `kubectl apply -f -`; what was injected (and what not, and why) on stderr.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { errorMessage } from "@ephemera/kit";
import { webhookConfig } from "../config.js";
import { patchManifests } from "./manifests.js";

export const USAGE = `usage: patch.js [--all] [--namespace NS] [--image IMAGE] [--routes HOST:PORT] [--token-secret NAME/KEY] FILE|-
  Prints FILE's manifests (- reads stdin) with the ephemera-router injected into every pod template
  annotated sidecar.ephemera.dev/inject (or sidecar.signadot.com/inject): "true", as the webhook
  would inject their pods. Apply with: kubectl apply -f <(node services/webhook/dist/patch.js app.yaml)
  --all           inject every pod template, annotated or not
  --namespace NS  the namespace of manifests that name none (default: default)
  --image, --routes, --token-secret: as EPHEMERA_ROUTER_IMAGE, EPHEMERA_ROUTES, EPHEMERA_ROUTER_TOKEN_SECRET`;

export interface CliIo {
  env: Record<string, string | undefined>;
  stdin: () => string;
  stdout: (text: string) => void;
  stderr: (line: string) => void;
}

/** Runs the CLI; answers its exit code (0 done, 1 a manifest could not be read, 2 bad arguments). */
export function runPatch(argv: string[], io: CliIo): number {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv, allowPositionals: true,
      options: {
        all: { type: "boolean" }, namespace: { type: "string", short: "n" }, image: { type: "string" },
        routes: { type: "string" }, "token-secret": { type: "string" }, help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    io.stderr(`${errorMessage(err)}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) { io.stdout(`${USAGE}\n`); return 0; }
  if (positionals.length !== 1) { io.stderr(`one FILE (or - for stdin), not ${positionals.length}\n${USAGE}`); return 2; }
  try {
    const { inject } = webhookConfig({
      EPHEMERA_ROUTER_IMAGE: values.image ?? io.env["EPHEMERA_ROUTER_IMAGE"],
      EPHEMERA_ROUTES: values.routes ?? io.env["EPHEMERA_ROUTES"],
      EPHEMERA_ROUTER_TOKEN_SECRET: values["token-secret"] ?? io.env["EPHEMERA_ROUTER_TOKEN_SECRET"],
    });
    const file = positionals[0]!;
    const text = file === "-" ? io.stdin() : readFileSync(file, "utf8");
    const result = patchManifests(text, { ...inject, ...(values.namespace ? { namespace: values.namespace } : {}), all: values.all ?? false });
    io.stdout(result.yaml);
    for (const note of result.notes) io.stderr(note);
    return 0;
  } catch (err) {
    io.stderr(`patch.js: ${errorMessage(err)}`);
    return 1;
  }
}

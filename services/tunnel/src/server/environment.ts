// `POST /v1/environment`: the configuration a local workload's baseline runs with, for the
// workstation that serves it. Only a local the session serves now, and only after the API
// says again that the session's token may serve it (an editor's); the answer carries
// Secrets' values in its body and nowhere else: the log line names the local and counts.
import type { ServerHttp2Stream } from "node:http2";
import { errorMessage, type Logger } from "@ephemera/kit";
import type { EnvironmentRequest } from "../protocol.js";
import { isRefusal, type Authorize } from "./authorize.js";
import { isEnvironmentError, type ReadEnvironment } from "./kube-environment.js";
import type { Session } from "./session.js";

/** A request body is two names: anything near this is not one. */
const MAX_BODY_BYTES = 4096;

export interface EnvironmentDeps {
  authorize: Authorize;
  logger: Logger;
  /** Absent: the tunnel has no kubeconfig and cannot see a cluster. */
  readEnvironment?: ReadEnvironment;
}

type Answer = (stream: ServerHttp2Stream, status: number, text: string) => void;

export async function answerEnvironment(stream: ServerHttp2Stream, session: Session, deps: EnvironmentDeps, answer: Answer): Promise<void> {
  const request = requestProblem(await readBody(stream));
  if (typeof request === "string") return answer(stream, 400, request);
  const { sandbox, local } = request;
  const served = session.serving().find((s) => s.sandbox === sandbox && s.local === local);
  if (!served) {
    const serving = session.serving().map((s) => `${s.sandbox}/${s.local}`).join(", ") || "none";
    return answer(stream, 403, `session ${session.id} does not serve local ${local} of sandbox ${sandbox} (it serves: ${serving})`);
  }
  if (!deps.readEnvironment) {
    return answer(stream, 501, "the tunnel cannot see a cluster (it runs without a kubeconfig): the baseline's environment cannot be read here");
  }
  try {
    // Asked again: the token may have lost the right since the session opened, and the spec may have changed.
    const now = await deps.authorize(session.token, [sandbox]);
    const spec = now.specs?.find((s) => s.sandbox === sandbox && s.local.name === local)?.local;
    if (!spec) return answer(stream, 409, `local ${local} of sandbox ${sandbox} is no longer served to this session`);
    const environment = await deps.readEnvironment({ sandbox, routingKey: served.routingKey, spec, mappings: served.mappings });
    if (stream.destroyed) return;
    stream.respond({ ":status": 200, "content-type": "application/json", "cache-control": "no-store" });
    stream.end(JSON.stringify(environment));
    deps.logger.info({
      sessionId: session.id, subject: session.subject, sandbox, local, baseline: `${environment.baseline.kind} ${environment.baseline.namespace}/${environment.baseline.name}`,
      variables: environment.env.length, customized: environment.values.env.length + environment.values.files.length, unresolved: environment.unresolved.length,
    }, "tunnel: environment of a local workload read for its workstation");
  } catch (err) {
    if (isRefusal(err) || isEnvironmentError(err)) return answer(stream, err.status, err.message);
    deps.logger.warn({ sessionId: session.id, sandbox, local, err: errorMessage(err) }, "tunnel: environment of a local workload not read");
    answer(stream, 503, `the environment cannot be read now: ${errorMessage(err)}`);
  }
}

function requestProblem(body: string | undefined): EnvironmentRequest | string {
  if (body === undefined) return `the body must be JSON {"sandbox","local"} of at most ${MAX_BODY_BYTES} bytes`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return `the body must be JSON {"sandbox","local"}, got ${body.slice(0, 80)}`;
  }
  const m = parsed as Partial<Record<keyof EnvironmentRequest, unknown>> | null;
  const name = (v: unknown) => typeof v === "string" && v.length > 0 && v.length <= 253;
  if (!m || !name(m.sandbox)) return "sandbox must be a sandbox's name";
  if (!name(m.local)) return "local must be the name of a local workload of the sandbox (spec.local[].name)";
  return { sandbox: m.sandbox as string, local: m.local as string };
}

/** The request body; undefined when it is over MAX_BODY_BYTES. */
function readBody(stream: ServerHttp2Stream): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    stream.once("end", () => resolve(size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString("utf8")));
    stream.once("close", () => resolve(undefined));
  });
}

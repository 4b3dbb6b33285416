// Who may serve what: the API's LocalService.Serve, called with the workstation's own bearer
// token exactly as `eph` sends it, so the API's tokens and roles decide. Its status becomes
// the HTTP status the workstation is refused with.
import * as pb from "@ephemera/proto";
import { TUNNEL_SERVER, channelCredentials, clientOptions, grpc, openApiNotice, type ClientTls } from "@ephemera/kit";
import type { Served } from "../protocol.js";

/** A refusal to send to the workstation: an HTTP status and one line. */
export class Refusal extends Error {
  override readonly name = "Refusal";
  constructor(readonly status: number, reason: string) {
    super(reason.replace(/[\r\n]+/g, " "));
  }
}
export const isRefusal = (err: unknown): err is Refusal => err instanceof Refusal;

const STATUS: Partial<Record<grpc.status, number>> = {
  [grpc.status.UNAUTHENTICATED]: 401,
  [grpc.status.PERMISSION_DENIED]: 403,
  [grpc.status.NOT_FOUND]: 404,
  [grpc.status.INVALID_ARGUMENT]: 400,
  [grpc.status.FAILED_PRECONDITION]: 400,
};

/** The HTTP status for a gRPC status of LocalService.Serve: 503 for any not named (the API is down, slow, failing). */
export const httpStatusOf = (code: grpc.status): number => STATUS[code] ?? 503;

export interface Authorization {
  subject: string;
  served: Served[];
  /** The API runs without tokens: whoever reaches the tunnel is served. */
  open?: boolean;
  /** Each served local's entry as the sandbox's spec has it (its baseline, env and files): what /v1/environment reads for. */
  specs?: Array<{ sandbox: string; local: pb.Local }>;
}

export type Authorize = (token: string | undefined, sandboxes: string[]) => Promise<Authorization>;

const servedOf = (l: pb.ServedLocal): Served => ({
  sandbox: l.sandbox, routingKey: l.routingKey, local: l.local?.name ?? "",
  mappings: (l.local?.mappings ?? []).map((m) => ({ port: m.port, toLocal: m.toLocal })),
  ...(l.status ? { status: l.status } : {}),
});

/** Asks the API at `address`; each call bounded by `timeoutMs`. */
export function apiAuthorizer(address: string, tls: ClientTls | undefined, timeoutMs = 5_000): { authorize: Authorize; close(): void } {
  const { credentials, options } = channelCredentials(tls);
  const client = new pb.LocalServiceClient(address, credentials, { ...clientOptions, ...options });
  const authorize: Authorize = (token, sandboxes) => new Promise((resolve, reject) => {
    const metadata = new grpc.Metadata();
    if (token) metadata.set("authorization", `Bearer ${token}`);
    client.serve({ sandboxes }, metadata, { deadline: Date.now() + timeoutMs }, (err, res) => {
      if (err) return reject(new Refusal(httpStatusOf(err.code), err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED
        ? `the API at ${address} cannot be asked now: ${err.details}` : err.details));
      resolve({
        subject: res.subject, served: res.locals.map(servedOf), open: res.open,
        specs: res.locals.flatMap((l) => (l.local ? [{ sandbox: l.sandbox, local: l.local }] : [])),
      });
    });
  });
  return { authorize, close: () => client.close() };
}

/**
 * The rule the API, the Routes API and the gateway follow, kept by the tunnel too: on an API
 * without tokens anyone who reaches the tunnel could take a sandbox's traffic and dial the
 * cluster, which is fine on loopback only, unless EPHEMERA_API_ALLOW_OPEN says otherwise.
 * The tunnel learns that the API is open from its answer, so every session is refused (403).
 */
export function refuseOpenApiElsewhere(authorize: Authorize, listen: string, allowOpen: boolean): Authorize {
  return async (token, sandboxes) => {
    const authorization = await authorize(token, sandboxes);
    if (!authorization.open) return authorization;
    try {
      openApiNotice(listen, { secured: false, allowOpen, server: TUNNEL_SERVER });
    } catch (err) {
      throw new Refusal(403, (err as Error).message);
    }
    return authorization;
  };
}

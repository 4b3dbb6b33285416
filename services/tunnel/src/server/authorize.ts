// Who may serve what: the API's LocalService.Serve, called with the workstation's own bearer
// token exactly as `eph` sends it, so the API's tokens and roles decide. Its status becomes
// the HTTP status the workstation is refused with.
import * as pb from "@ephemera/proto";
import { channelCredentials, clientOptions, grpc, type ClientTls } from "@ephemera/kit";
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
  /** Each served local's entry as the sandbox's spec has it (its baseline, env and files): what /v1/environment reads for. */
  specs?: Array<{ sandbox: string; local: pb.Local }>;
}

export type Authorize = (token: string | undefined, sandboxes: string[]) => Promise<Authorization>;

const servedOf = (l: pb.ServedLocal): Served => ({
  sandbox: l.sandbox, routingKey: l.routingKey, local: l.local?.name ?? "",
  mappings: (l.local?.mappings ?? []).map((m) => ({ port: m.port, toLocal: m.toLocal })),
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
        subject: res.subject, served: res.locals.map(servedOf),
        specs: res.locals.flatMap((l) => (l.local ? [{ sandbox: l.sandbox, local: l.local }] : [])),
      });
    });
  });
  return { authorize, close: () => client.close() };
}

// gRPC plumbing shared by every service: a server with health checking and reflection,
// error → status mapping (with google.rpc.BadRequest details), and deadline-bound calls.
import * as grpc from "@grpc/grpc-js";
import { loadFileDescriptorSetFromBuffer } from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation } from "grpc-health-check";
import { Any, BadRequest, RpcStatus, descriptorSetBase64 } from "@ephemera/proto";
import type { Logger } from "./logger.js";
import { tolerateMalformed } from "./malformed.js";
import { loadShedder } from "./shed.js";
import { channelCredentials, serverCredentials, type ClientTls, type ServerTls } from "./tls.js";
import {
  ConflictError, EphemeraError, NotFoundError, PermissionDeniedError, TooLargeError, UnauthenticatedError, UnavailableError, ValidationError,
  errorMessage, type FieldViolation,
} from "./errors.js";

const STATUS_DETAILS = "grpc-status-details-bin";

/**
 * The largest request a server takes (a plugin file is at most 900 KiB, checked with a clear
 * error by validation; this bound is for the transport: a request over it is refused with
 * RESOURCE_EXHAUSTED, which clients read as a ValidationError) and the largest answer it sends.
 * Clients set the same receive bound (see `clientOptions`).
 */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** Unary requests a server handles at once before it answers RESOURCE_EXHAUSTED. */
export const MAX_IN_FLIGHT = 256;
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
export const clientOptions: grpc.ClientOptions = {
  "grpc.max_receive_message_length": MAX_RESPONSE_BYTES,
  "grpc.max_send_message_length": MAX_REQUEST_BYTES,
};
const BAD_REQUEST_URL = "type.googleapis.com/google.rpc.BadRequest";

export interface ServiceBinding {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
}

export interface RunningServer {
  /** The port bound (useful when listening on port 0). */
  port: number;
  health: HealthImplementation;
  /** SERVING or NOT_SERVING for the whole server; ignored once shutting down. */
  setServing(serving: boolean): void;
  shutdown(): Promise<void>;
}

/** Something a service depends on that can be lost for a while (e.g. its NATS connection). */
export interface HealthSource {
  readonly healthy: boolean;
  /** Called on each change; returns an unsubscribe function. */
  onChange(listener: (healthy: boolean) => void): () => void;
}

/**
 * Reports the server NOT_SERVING while any source is unhealthy and SERVING again once all
 * are back: a service riding out an outage stays up but tells its health checks it is degraded.
 */
export function followHealth(server: RunningServer, sources: HealthSource[]): () => void {
  const update = () => server.setServing(sources.every((s) => s.healthy));
  const unsubscribe = sources.map((s) => s.onChange(update));
  update();
  return () => { for (const u of unsubscribe) u(); };
}

export interface GrpcServerOptions {
  maxInFlight?: number;
  /** Serve over TLS (and ask for client certificates when it has a client CA); absent: plaintext. */
  tls?: ServerTls;
}

export async function startGrpcServer(
  listen: string,
  services: ServiceBinding[],
  logger: Logger,
  options: GrpcServerOptions = {},
): Promise<RunningServer> {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": MAX_REQUEST_BYTES,
    "grpc.max_send_message_length": MAX_RESPONSE_BYTES,
  });
  const shedder = loadShedder(options.maxInFlight ?? MAX_IN_FLIGHT);
  for (const s of services.map(tolerateMalformed).map(shedder.wrap)) server.addService(s.definition, s.implementation);
  const health = new HealthImplementation({ "": "SERVING" });
  health.addToServer(server);
  const descriptors = loadFileDescriptorSetFromBuffer(Buffer.from(descriptorSetBase64, "base64"));
  new ReflectionService(descriptors).addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(listen, serverCredentials(options.tls), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const transport = !options.tls ? "plaintext" : options.tls.clientCa ? "mtls" : "tls";
  logger.info({ listen, port, transport }, "grpc listening");
  let shuttingDown = false;
  return {
    port,
    health,
    setServing: (serving) => { if (!shuttingDown) health.setStatus("", serving ? "SERVING" : "NOT_SERVING"); },
    shutdown: () =>
      new Promise<void>((resolve) => {
        shuttingDown = true;
        health.setStatus("", "NOT_SERVING");
        const force = setTimeout(() => server.forceShutdown(), 5000);
        server.tryShutdown(() => { clearTimeout(force); resolve(); });
      }),
  };
}

/** Maps a thrown error to a gRPC status; validation errors carry every field violation. */
export function toServiceError(err: unknown): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  if (err instanceof ValidationError) {
    const details = BadRequest.encode({
      fieldViolations: err.violations.map((v) => ({ field: v.field, description: v.description, reason: v.rule })),
    }).finish();
    const status = RpcStatus.encode({
      code: grpc.status.INVALID_ARGUMENT,
      message: err.message,
      details: [Any.fromPartial({ typeUrl: BAD_REQUEST_URL, value: Buffer.from(details) })],
    }).finish();
    metadata.set(STATUS_DETAILS, Buffer.from(status));
    return { code: grpc.status.INVALID_ARGUMENT, details: err.message, metadata };
  }
  const code =
    err instanceof TooLargeError ? grpc.status.INVALID_ARGUMENT
    : err instanceof NotFoundError ? grpc.status.NOT_FOUND
    : err instanceof ConflictError ? grpc.status.FAILED_PRECONDITION
    : err instanceof UnauthenticatedError ? grpc.status.UNAUTHENTICATED
    : err instanceof PermissionDeniedError ? grpc.status.PERMISSION_DENIED
    : err instanceof UnavailableError ? grpc.status.UNAVAILABLE
    : err instanceof EphemeraError && err.retryable ? grpc.status.UNAVAILABLE
    : grpc.status.INTERNAL;
  return { code, details: errorMessage(err), metadata };
}

/** grpc-js's words for a message over the size bound, on either side: "larger than max (N vs M)", "size larger than M". */
function tooLargeRequest(details: string): ValidationError | undefined {
  if (!/larger than max|size larger than/.test(details)) return undefined;
  const size = /\((\d+) vs\.? \d+\)/.exec(details)?.[1];
  return new ValidationError([{
    field: "",
    description: `the request${size ? ` is ${size} bytes,` : " is"} over the ${MAX_REQUEST_BYTES}-byte (4 MiB) limit of an ephemera request`,
    rule: "too-long",
  }], "request too large");
}

/** Turns a status received by a client back into the named error it stands for. */
export function fromServiceError(err: unknown): Error {
  const e = err as Partial<grpc.ServiceError>;
  if (typeof e?.code !== "number") return err instanceof Error ? err : new Error(String(err));
  const message = e.details || e.message || "request failed";
  switch (e.code) {
    case grpc.status.INVALID_ARGUMENT: {
      const raw = e.metadata?.get(STATUS_DETAILS)[0];
      const violations: FieldViolation[] = [];
      if (raw instanceof Buffer) {
        for (const any of RpcStatus.decode(raw).details) {
          if (any.typeUrl !== BAD_REQUEST_URL) continue;
          for (const v of BadRequest.decode(any.value).fieldViolations) {
            violations.push({ field: v.field, description: v.description, rule: v.reason });
          }
        }
      }
      if (violations.length) return new ValidationError(violations, message.split(":\n")[0]);
      return new ValidationError([{ field: "", description: message, rule: "invalid" }], "invalid request");
    }
    case grpc.status.NOT_FOUND: return new NotFoundError(message);
    case grpc.status.UNAUTHENTICATED: return new UnauthenticatedError(message);
    case grpc.status.PERMISSION_DENIED: return new PermissionDeniedError(message);
    case grpc.status.FAILED_PRECONDITION:
    case grpc.status.ALREADY_EXISTS: return new ConflictError(message);
    case grpc.status.RESOURCE_EXHAUSTED:
      // The transport's size bound (the server's, or this client's own before sending) is a
      // refusal that retrying cannot help; everything else under this status is load shedding.
      return tooLargeRequest(message) ?? new UnavailableError(message, { cause: err });
    case grpc.status.UNAVAILABLE:
    case grpc.status.DEADLINE_EXCEEDED: return new UnavailableError(message, { cause: err });
    default: return new Error(message, { cause: err });
  }
}

/** Adapts an async function to a grpc-js unary handler, mapping errors to statuses. */
export function unary<Req, Res>(
  fn: (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>,
  logger?: Logger,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    fn(call.request, call).then(
      (res) => callback(null, res),
      (err: unknown) => {
        if (!(err instanceof EphemeraError)) logger?.error({ err }, "request failed");
        callback(toServiceError(err), null);
      },
    );
  };
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;

/** Calls a unary method with a deadline; failures come back as named errors. */
export function call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, timeoutMs = 10_000, metadata = new grpc.Metadata()): Promise<Res> {
  return new Promise((resolve, reject) => {
    method(request, metadata, { deadline: Date.now() + timeoutMs }, (err, res) =>
      err ? reject(fromServiceError(err)) : resolve(res),
    );
  });
}

const HealthClient = grpc.makeGenericClientConstructor({
  check: {
    path: "/grpc.health.v1.Health/Check",
    requestStream: false,
    responseStream: false,
    requestSerialize: (v: Buffer) => v,
    requestDeserialize: (v: Buffer) => v,
    responseSerialize: (v: Buffer) => v,
    responseDeserialize: (v: Buffer) => v,
  },
}, "Health");

/**
 * One gRPC health check of the whole server: true when it answers SERVING (field 1 = 1) within
 * the deadline. A server on TLS is checked with the client TLS given.
 */
export function checkHealth(address: string, deadlineMs = 1000, tls?: ClientTls): Promise<boolean> {
  const { credentials, options } = channelCredentials(tls);
  const client = new HealthClient(address, credentials, options);
  return new Promise<boolean>((resolve) => {
    client.makeUnaryRequest("/grpc.health.v1.Health/Check", (v: Buffer) => v, (v: Buffer) => v, Buffer.alloc(0),
      { deadline: Date.now() + deadlineMs }, (err, res?: Buffer) => resolve(!err && !!res && res[0] === 0x08 && res[1] === 0x01));
  }).finally(() => client.close());
}

export { grpc };

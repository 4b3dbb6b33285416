// What both ends of an ephemera gRPC call agree on: the message-size bounds, and the mapping
// between named errors and statuses (with google.rpc.BadRequest details) in both directions.
import * as grpc from "@grpc/grpc-js";
import { Any, BadRequest, RpcStatus } from "@ephemera/proto";
import {
  ConflictError, EphemeraError, NotFoundError, PermissionDeniedError, TooLargeError, UnauthenticatedError, UnavailableError, ValidationError,
  errorMessage, type FieldViolation,
} from "./errors.js";

const STATUS_DETAILS = "grpc-status-details-bin";
const BAD_REQUEST_URL = "type.googleapis.com/google.rpc.BadRequest";

/**
 * The largest request a server takes (a plugin file is at most 900 KiB, checked with a clear
 * error by validation; this bound is for the transport: a request over it is refused with
 * RESOURCE_EXHAUSTED, which clients read as a ValidationError) and the largest answer it sends.
 * Clients set the same receive bound (see `clientOptions`).
 */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

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

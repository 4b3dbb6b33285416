// How a failure reaches the browser: one JSON line `{error, code}` with the HTTP status that
// stands for the API's gRPC status (docs/console.md), so the page can say what went wrong.
import { grpc } from "@ephemera/kit/client";

type GrpcStatus = grpc.status;
const grpcStatus = grpc.status;

/** A call to the API that ended with a gRPC status other than OK; the status is kept as is. */
export class ApiCallError extends Error {
  override readonly name = "ApiCallError";
  constructor(readonly code: GrpcStatus, message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
export const isApiCallError = (err: unknown): err is ApiCallError => err instanceof ApiCallError;

/** A request the console itself refuses (bad query, missing CSRF header, unknown route). */
export class ConsoleRequestError extends Error {
  override readonly name = "ConsoleRequestError";
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

const HTTP_STATUS: Partial<Record<GrpcStatus, number>> = {
  [grpcStatus.UNAUTHENTICATED]: 401,
  [grpcStatus.PERMISSION_DENIED]: 403,
  [grpcStatus.NOT_FOUND]: 404,
  [grpcStatus.INVALID_ARGUMENT]: 400,
  [grpcStatus.FAILED_PRECONDITION]: 409,
  [grpcStatus.ALREADY_EXISTS]: 409,
  [grpcStatus.DEADLINE_EXCEEDED]: 504,
  [grpcStatus.UNAVAILABLE]: 502,
};

/** Pure: the HTTP status for a gRPC status; 500 for any not named. */
export const httpStatusOf = (code: GrpcStatus): number => HTTP_STATUS[code] ?? 500;

/** Pure: the gRPC status's name as the API documents it (`PERMISSION_DENIED`). */
export const codeName = (code: GrpcStatus): string => grpcStatus[code] ?? "UNKNOWN";

/** Pure: the status and body a failure is answered with; one line, whatever the cause said. */
export function errorResponse(err: unknown): { status: number; body: { error: string; code: string } } {
  const line = (text: string) => text.replace(/\s*[\r\n]+\s*/g, " ").trim() || "request failed";
  if (err instanceof ConsoleRequestError) return { status: err.status, body: { error: line(err.message), code: err.code } };
  if (err instanceof ApiCallError) return { status: httpStatusOf(err.code), body: { error: line(err.message), code: codeName(err.code) } };
  return { status: 500, body: { error: "the console failed to answer (see its log)", code: "INTERNAL" } };
}

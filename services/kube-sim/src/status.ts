// Errors answered as Kubernetes answers them: a `Status` object whose reason and code
// clients (client-node, kubectl) branch on, so the shapes follow the real API server's.
import type { ResourceType } from "./resources.js";

export interface StatusDetails { name?: string; group?: string; kind?: string; uid?: string; retryAfterSeconds?: number; causes?: Array<{ reason?: string; message: string; field?: string }> }

export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(readonly code: number, readonly reason: string, message: string, readonly details?: StatusDetails) {
    super(message);
  }
  toStatus(): Record<string, unknown> {
    return {
      kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: this.message, reason: this.reason,
      ...(this.details ? { details: this.details } : {}), code: this.code,
    };
  }
}

export const isApiError = (err: unknown): err is ApiError => err instanceof ApiError;

/** `pods "x"`, or `deployments.apps "x"` for a named group, as the real server words it. */
const qualified = (t: ResourceType) => (t.group ? `${t.plural}.${t.group}` : t.plural);
const detailsOf = (t: ResourceType, name: string): StatusDetails => ({ name, ...(t.group ? { group: t.group } : {}), kind: t.plural });

export const notFound = (t: ResourceType, name: string) =>
  new ApiError(404, "NotFound", `${qualified(t)} "${name}" not found`, detailsOf(t, name));

export const alreadyExists = (t: ResourceType, name: string) =>
  new ApiError(409, "AlreadyExists", `${qualified(t)} "${name}" already exists`, detailsOf(t, name));

export const conflict = (t: ResourceType, name: string) =>
  new ApiError(409, "Conflict",
    `Operation cannot be fulfilled on ${qualified(t)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    detailsOf(t, name));

export const namespaceNotFound = (ns: string) =>
  new ApiError(404, "NotFound", `namespaces "${ns}" not found`, { name: ns, kind: "namespaces" });

export const badRequest = (message: string) => new ApiError(400, "BadRequest", message);

/** One rule an object breaks, as Kubernetes' field.Error: its type, the field's path, what is wrong. */
export interface FieldError {
  type: "Invalid" | "Required" | "Forbidden" | "TooLong";
  field: string;
  detail: string;
  /** The offending value, quoted in the message of an `Invalid` error. */
  value?: string | number;
}

const TITLES: Record<FieldError["type"], string> = { Invalid: "Invalid value", Required: "Required value", Forbidden: "Forbidden", TooLong: "Too long" };

/** `Invalid value: "Bad_Name": a lowercase RFC 1123 …`, as field.Error.ErrorBody() words it. */
function errorBody(e: FieldError): string {
  const title = TITLES[e.type];
  if (e.type !== "Invalid") return e.detail ? `${title}: ${e.detail}` : title;
  const value = typeof e.value === "number" ? String(e.value) : JSON.stringify(e.value ?? "");
  return `${title}: ${value}: ${e.detail}`;
}

/** 422 Invalid naming every broken rule, one cause each; several are listed in brackets, as the real server does. */
export function invalidObject(t: ResourceType, name: string, errors: FieldError[]): ApiError {
  const lines = errors.map((e) => `${e.field}: ${errorBody(e)}`);
  const all = lines.length === 1 ? lines[0]! : `[${lines.join(", ")}]`;
  return new ApiError(422, "Invalid", `${t.kind} "${name}" is invalid: ${all}`, {
    ...detailsOf(t, name), kind: t.kind,
    causes: errors.map((e) => ({ reason: `FieldValue${e.type === "Invalid" ? "Invalid" : e.type}`, message: errorBody(e), field: e.field })),
  });
}

export const invalid = (t: ResourceType, name: string, field: string, message: string) =>
  invalidObject(t, name, [{ type: message.startsWith("Required value") ? "Required" : "Invalid", field, detail: message.replace(/^Required value:? ?/, "") }]);

/** The real server's limit on a request body (3 MiB), answered before anything is read into an object. */
export const requestEntityTooLarge = (limit: number) =>
  new ApiError(413, "RequestEntityTooLarge", `Request entity too large: limit is ${limit}`);

export const unsupportedMediaType = (accepted: string[]) =>
  new ApiError(415, "UnsupportedMediaType", `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`);

export const expired = (message: string) => new ApiError(410, "Expired", message);

/** The reason Kubernetes gives with each code, for injected failures. */
export function errorForCode(code: number): ApiError {
  switch (code) {
    case 429: return new ApiError(429, "TooManyRequests", "the server has received too many requests and has asked us to try again later", { retryAfterSeconds: 1 });
    case 409: return new ApiError(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again");
    case 503: return new ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request");
    case 504: return new ApiError(504, "Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request");
    case 404: return new ApiError(404, "NotFound", "the server could not find the requested resource");
    case 403: return new ApiError(403, "Forbidden", "forbidden: the caller may not do this (injected by kube-sim)");
    case 410: return new ApiError(410, "Expired", "too old resource version");
    default: return new ApiError(code, "InternalError", "an error on the server (\"injected by kube-sim\") has prevented the request from succeeding");
  }
}

// Named errors shared by every package. Each says whether retrying can help, so a
// consumer maps it to ack/nak/term and a gRPC handler to a status code.

export interface FieldViolation {
  /** Field path in the file, e.g. `spec.create[2].inputs[0].valueFromStep.output`. */
  field: string;
  /** The rule broken, in words a file's author can act on. */
  description: string;
  /** A stable short code for the rule, e.g. `unknown-step`. */
  rule: string;
}

/** A field's place in a document or message: keys and list indexes from the top. */
export type Path = readonly (string | number)[];

/** The document itself (e.g. when it is not a mapping at all). */
export const ROOT_FIELD = "(document)";

const PLAIN_KEY = /^[A-Za-z0-9_-]+$/;

/** A field path as authors read it: `spec.create[2].inputs[0].name`, `labels["a.b"]`. */
export function fieldPath(path: Path): string {
  if (path.length === 0) return ROOT_FIELD;
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (PLAIN_KEY.test(seg)) out += out === "" ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

export abstract class EphemeraError extends Error {
  abstract readonly code: string;
  abstract readonly retryable: boolean;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class ValidationError extends EphemeraError {
  readonly code = "invalid";
  readonly retryable = false;
  constructor(
    readonly violations: FieldViolation[],
    summary = "invalid spec",
  ) {
    super(`${summary}:\n${violations.map((v) => `  ${v.field}: ${v.description}`).join("\n")}`);
  }
}

/** Another writer appended to the aggregate first: re-read, re-decide, retry. */
export class ConcurrencyError extends EphemeraError {
  readonly code = "concurrency";
  readonly retryable = true;
  constructor(
    readonly subject: string,
    readonly expectedRevision: number,
    options?: { cause?: unknown },
  ) {
    super(`concurrent append to ${subject} (expected revision ${expectedRevision})`, options);
  }
}

export class NotFoundError extends EphemeraError {
  readonly code = "not-found";
  readonly retryable = false;
}

/** The request is well-formed but the current state forbids it (immutable version, in use, ...). */
export class ConflictError extends EphemeraError {
  readonly code = "conflict";
  readonly retryable = false;
}

/** Over a size limit (a commit over the server's max payload, a message over a bound): retrying cannot help. */
export class TooLargeError extends EphemeraError {
  readonly code = "too-large";
  readonly retryable = false;
}

/** A dependency (NATS, Redis, a peer service) failed or timed out; trying again may work. */
export class UnavailableError extends EphemeraError {
  readonly code = "unavailable";
  readonly retryable = true;
}

/** No credential, or one that does not verify (bad signature, expired, unknown): UNAUTHENTICATED. */
export class UnauthenticatedError extends EphemeraError {
  readonly code = "unauthenticated";
  readonly retryable = false;
}

/** A valid credential that does not allow this call: PERMISSION_DENIED. */
export class PermissionDeniedError extends EphemeraError {
  readonly code = "permission-denied";
  readonly retryable = false;
}

export const isValidationError = (e: unknown): e is ValidationError => e instanceof ValidationError;
export const isConcurrencyError = (e: unknown): e is ConcurrencyError => e instanceof ConcurrencyError;
export const isNotFoundError = (e: unknown): e is NotFoundError => e instanceof NotFoundError;
export const isConflictError = (e: unknown): e is ConflictError => e instanceof ConflictError;
export const isTooLargeError = (e: unknown): e is TooLargeError => e instanceof TooLargeError;
export const isRetryable = (e: unknown): boolean => e instanceof EphemeraError ? e.retryable : true;

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

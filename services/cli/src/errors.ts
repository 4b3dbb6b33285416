// How a command ends: its exit codes, and the two ways it ends badly besides the named
// errors of @ephemera/kit.

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
/** The API wants a (valid) bearer token: none was sent, or it is unknown, expired or badly signed. */
export const EXIT_UNAUTHENTICATED = 3;
/** The token is valid, but its role does not allow this. */
export const EXIT_PERMISSION_DENIED = 4;

/** The command line itself is wrong (missing or conflicting arguments): exit 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The operation ran and failed (a resource failed, a wait timed out): exit 1. */
export class OperationFailed extends Error {
  override readonly name = "OperationFailed";
}

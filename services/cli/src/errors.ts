// The two ways a command ends badly besides the named errors of @ephemera/kit.

/** The command line itself is wrong (missing or conflicting arguments): exit 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The operation ran and failed (a resource failed, a wait timed out): exit 1. */
export class OperationFailed extends Error {
  override readonly name = "OperationFailed";
}

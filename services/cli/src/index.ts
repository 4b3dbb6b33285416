// The `eph` command line as a library: run it in-process with your own streams.
export {
  run, EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAUTHENTICATED, EXIT_PERMISSION_DENIED, type Io, type Writer,
} from "./program.js";

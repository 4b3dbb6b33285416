// The main container's command: a POSIX sh script, so it runs in any runner image that has
// /bin/sh (alpine, busybox, distroless-with-shell), with no Node in it.
import { shQuote } from "./envfile.js";

/**
 * The entrypoint for an agent directory `dir` (baked in, so it does not depend on how it
 * is invoked). It sources the env file in a subshell (an input named like one of its own
 * variables cannot change them), runs the script in the background so that, as PID 1 of
 * its container, it can pass a SIGTERM (or SIGINT, SIGHUP) on to it as SIGTERM (a
 * background job of a non-interactive shell ignores SIGINT), waits for it (again
 * after a trapped signal interrupts `wait`), and records its exit code with a rename, so
 * the sidecar never reads half a file: 128+N when the script was killed by signal N.
 */
export function entrypointScript(dir: string): string {
  return `#!/bin/sh
# ephemera entrypoint: runs the step's script with its inputs and records its exit code.
# Written by ephemera-init; see docs/agent.md.
dir=${shQuote(dir).toString("utf8")}
record() {
  printf '%s\\n' "$1" > "$dir/exit-code.tmp.$$" && mv -f "$dir/exit-code.tmp.$$" "$dir/exit-code" && return 0
  echo "ephemera: cannot record the exit code $1 in $dir/exit-code" >&2
  return 1
}
for f in env script; do
  if [ ! -r "$dir/$f" ]; then
    echo "ephemera: $dir/$f is missing: the ephemera-init container did not prepare this step" >&2
    record 127
    exit 127
  fi
done
set -- "$dir/script"
(
  . "$dir/env" || exit 126
  cd "$HOME" || { echo "ephemera: cannot enter HOME ($HOME)" >&2; exit 126; }
  exec "$1"
) &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while :; do
  wait "$child"
  code=$?
  kill -0 "$child" 2>/dev/null || break
done
trap - TERM INT HUP
record "$code" || exit 1
exit "$code"
`;
}

// The main container's command: a POSIX sh script, so it runs in any runner image that has
// /bin/sh (alpine, busybox, distroless-with-shell), with no Node in it.
import { shQuote } from "./envfile.js";

/**
 * The entrypoint for an agent directory `dir` (baked in, so it does not depend on how it
 * is invoked). It sources the env file in a subshell (an input named like one of its own
 * variables cannot change them), runs the script in the background so that, as PID 1 of
 * its container, it can pass a SIGTERM (or SIGINT, SIGHUP) on to it as SIGTERM (a
 * background job of a non-interactive shell ignores SIGINT), waits for it (again
 * after a trapped signal interrupts `wait`: then the script has not ended yet, or the
 * shell holds its status for the next `wait`; the only miss is a script that ends in the
 * instant between a `wait` that returned its status and the trap, recorded 127), and
 * records its exit code with a rename, so the sidecar never reads half a file: 128+N
 * when the script was killed by signal N. Before that it makes the declared `outputs`
 * readable to all: the sidecar runs as the agents' user, main as the image's (often root),
 * and a script's umask or a copied input may leave them 0600. The files are in the pod's
 * own volumes; a symbolic link is left as it is (its target is not the pod's).
 */
export function entrypointScript(dir: string, outputs: string[] = []): string {
  const opened = outputs.length
    ? `# The sidecar may run as another user: it must be able to read the outputs.
for f in ${outputs.map((o) => shQuote(o).toString("utf8")).join(" ")}; do
  if [ -f "$f" ] && [ ! -L "$f" ]; then chmod a+r "$f" 2>/dev/null; fi
done
`
    : "";
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
# Trapped before the script starts: a signal that comes before $child is known stops it as soon as it is.
child=
stopped=
trap 'signalled=1; if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; else stopped=1; fi' TERM INT HUP
set -- "$dir/script"
(
  . "$dir/env" || exit 126
  cd "$HOME" || { echo "ephemera: cannot enter HOME ($HOME)" >&2; exit 126; }
  exec "$1"
) &
child=$!
if [ -n "$stopped" ]; then kill -TERM "$child" 2>/dev/null; fi
# A trapped signal ends \`wait\` early (128+N) without the script having ended: wait again. The
# shell keeps the script's status until it is waited for, even when it has reaped it already.
while :; do
  signalled=
  wait "$child"
  code=$?
  [ -z "$signalled" ] && break
done
trap - TERM INT HUP
${opened}record "$code" || exit 1
exit "$code"
`;
}

// A runner incarnation is `<host>-<pid>`: what names it in `steprun.started` and in a run's
// claim, and what lets a runner of the same host tell that a claim's holder is gone.

export const incarnation = (host: string, pid: number) => `${host}-${pid}`;

/**
 * Whether `holder` is a runner of `host` whose process is gone. Its process-driver steps
 * died with it (parent-death signal), so its claims need not be waited out.
 */
export function deadHere(host: string, self = process.pid): (holder: string) => boolean {
  return (holder) => {
    const m = /^(.*)-(\d+)$/.exec(holder);
    const pid = Number(m?.[2]);
    if (m?.[1] !== host || pid === self) return false;
    try {
      process.kill(pid, 0);
      return false;
    } catch (err) {
      // EPERM: a process of another user lives under that pid.
      return (err as NodeJS.ErrnoException).code === "ESRCH";
    }
  };
}

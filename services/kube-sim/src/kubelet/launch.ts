// Starts one container as a local process in its own mount namespace: `unshare` runs a
// short sh script that binds the container's private /tmp, its volumes, the image map's
// directories and its termination-message file, then drops to the container's user and
// execs the command, so the process id we hold is the container's own (one fork, no
// resident helper). The process leads its own group, so a kill reaches its children too.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync } from "node:fs";
import { posix } from "node:path";

export interface Mount { source: string; target: string; readOnly: boolean; /** a file, not a directory */ file?: boolean }

export interface LaunchSpec {
  argv: string[];
  env: Record<string, string>;
  workingDir: string | undefined;
  uid: number | undefined;
  gid: number | undefined;
  /** Host directory seen as /tmp. */
  privateTmp: string;
  mounts: Mount[];
  logFile: string;
}

const bin = (name: string) => ["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"].map((d) => d + name).find(existsSync) ?? name;
const TOOLS = { unshare: bin("unshare"), mount: bin("mount"), mkdir: bin("mkdir"), setpriv: bin("setpriv"), sh: "/bin/sh" };

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const depth = (p: string) => p.split("/").filter(Boolean).length;

/** Pure: the script run inside the new mount namespace; the command comes as "$@". */
export function launchScript(spec: LaunchSpec): string {
  const { mount, mkdir, setpriv } = TOOLS;
  const lines = ["set -e"];
  // A target under /tmp is mounted inside the private /tmp directory first, while every
  // source (the data dir may itself be under the host's /tmp) is still in sight; the
  // private directory then goes over /tmp with its submounts (--rbind), last.
  const underTmp = (t: string) => t === "/tmp" || t.startsWith("/tmp/");
  const placed = spec.mounts.map((m) => (underTmp(m.target) ? { ...m, target: posix.join(spec.privateTmp, m.target.slice(4)) } : m));
  // Shallow targets first, so a mount inside another volume's path lands on top of it; but
  // a mount whose source another mount's target would hide (the agent image's directory
  // under /work, and a volume at /work) goes before that one, while its source is in sight.
  const within = (path: string, dir: string) => path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`);
  const hidden = (b: Mount) => placed.some((a) => a !== b && within(b.source, a.target) && !within(b.target, a.target));
  const byDepth = [...placed].sort((a, b) => depth(a.target) - depth(b.target));
  for (const m of [...byDepth.filter(hidden), ...byDepth.filter((m) => !hidden(m))]) {
    const t = q(m.target);
    if (m.file) lines.push(`[ -e ${t} ] || { ${mkdir} -p "$(dirname ${t})"; : > ${t}; }`);
    else lines.push(`[ -d ${t} ] || ${mkdir} -p ${t}`);
    lines.push(`${mount} --bind ${q(m.source)} ${t}`);
    if (m.readOnly) lines.push(`${mount} -o remount,bind,ro ${t}`);
  }
  lines.push(`${mount} --rbind ${q(spec.privateTmp)} /tmp`);
  if (spec.workingDir) lines.push(`cd ${q(spec.workingDir)}`);
  const drop = spec.uid !== undefined || spec.gid !== undefined
    ? `${setpriv} ${spec.uid !== undefined ? `--reuid=${spec.uid} ` : ""}--regid=${spec.gid ?? spec.uid ?? 0} --clear-groups -- `
    : "";
  lines.push(`exec ${drop}"$@"`);
  return lines.join("\n");
}

export function launch(spec: LaunchSpec): ChildProcess {
  const log = openSync(spec.logFile, "a");
  try {
    return spawn(TOOLS.unshare, ["--mount", "--propagation", "private", "--", TOOLS.sh, "-c", launchScript(spec), "sh", ...spec.argv], {
      env: spec.env,
      stdio: ["ignore", log, log],
      detached: true,
    });
  } finally {
    closeSync(log);
  }
}

/** Signals a container's whole process group; a group already gone is fine. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: nothing left to signal.
  }
}

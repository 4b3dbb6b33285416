// node test/bench/step-network.mjs [runs]: what a step's own network adds to a step, as root.
// Runs ephemera-launch on a trivial script as the runner does (pid namespace, nobody, tmpfs
// views, host read-only), with the runner's network (host), a new empty namespace (none)
// and a namespace of a prepared pool (outside), alternating; prints the median of each and
// the difference to host. Makes one namespace of its own and removes it.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./system.mjs";

const runs = Number(process.argv[2] ?? 100);
const launcher = join(ROOT, "services/runner/dist/ephemera-launch");
const dir = mkdtempSync("/var/tmp/ephemera-netbench-");
const ns = `ephemera-bench-${process.pid}`;
const resolv = join(dir, "resolv.conf");
writeFileSync(resolv, "nameserver 10.0.0.2\n", { mode: 0o644 });
execFileSync("ip", ["netns", "add", ns]);
execFileSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
const modes = { host: [], none: ["--newnet"], outside: ["--netns", `/run/netns/${ns}`, "--resolv", resolv] };
const times = Object.fromEntries(Object.keys(modes).map((m) => [m, []]));
try {
  for (let i = 0; i < runs; i++) {
    for (const [mode, flags] of Object.entries(modes)) {
      const rundir = join(dir, `run-${mode}-${i}`);
      mkdirSync(rundir, { mode: 0o700 });
      writeFileSync(join(rundir, "script"), "#!/bin/sh\nexit 0\n", { mode: 0o700 });
      const t = performance.now();
      execFileSync(launcher, [...flags, "--rundir", rundir, "--pidns", "--uid", "65534", "--gid", "65534",
        "--tmpfs-size", String(16 << 20), "--readonly-host", "--view", "/tmp"]);
      times[mode].push(performance.now() - t);
      rmSync(rundir, { recursive: true, force: true });
    }
  }
} finally {
  execFileSync("ip", ["netns", "del", ns]);
  rmSync(dir, { recursive: true, force: true });
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const mode of Object.keys(modes)) {
  const m = median(times[mode]);
  console.log(`${mode.padEnd(8)} median ${m.toFixed(2)} ms  (+${(m - median(times.host)).toFixed(2)} ms over host)`);
}

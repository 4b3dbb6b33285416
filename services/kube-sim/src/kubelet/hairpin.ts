// Hairpin mode on a pod's port of the Docker bridge, as the kubelet's hairpin-veth mode sets
// it: a pod that calls a Service whose chosen endpoint is itself sends its packets out
// through the bridge and, once the host has DNATed them (br_netfilter), they must come back
// in through the same port, which a bridge port refuses unless it is in hairpin mode.
import { readFile, readdir, writeFile } from "node:fs/promises";

/** Sets hairpin mode on the host end of the veth of the network namespace of process `pid`; false when there is none (not on a bridge). */
export async function enableHairpin(pid: number): Promise<boolean> {
  // The container's eth0 names its peer's interface index on the host.
  const peer = (await readFile(`/proc/${pid}/root/sys/class/net/eth0/iflink`, "utf8").catch(() => "")).trim();
  if (!peer) return false;
  for (const name of await readdir("/sys/class/net")) {
    const index = (await readFile(`/sys/class/net/${name}/ifindex`, "utf8").catch(() => "")).trim();
    if (index !== peer) continue;
    try {
      await writeFile(`/sys/class/net/${name}/brport/hairpin_mode`, "1");
      return true;
    } catch {
      return false;
    }
  }
  return false;
}

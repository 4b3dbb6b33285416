// Where the process driver's run directories go by default, and what every step gets a
// private view of. A run directory is made, written (script, inputs), read (status,
// outputs) and removed around every step: on the disk-backed machines this project is
// measured on, each mkdir or small file there cost about 0.5 ms, on a tmpfs 0.02 ms
// (docs/performance.md). So the default is the host's memory filesystem, /dev/shm, when it
// has room; a step is given a private /dev/shm of its own, which hides the run directories
// there (other steps' inputs among them) as its private /tmp hides those under /tmp.
import { accessSync, constants, existsSync, statfsSync } from "node:fs";

export const MEMORY_DIR = "/dev/shm";
const TMPFS_MAGIC = 0x01021994;
/**
 * Less room than this on the memory filesystem and the disk is used instead: Docker's and
 * Kubernetes' default /dev/shm is 64 MiB, and every running step's inputs and outputs (up to
 * 1 MiB each) are there until it is recorded.
 */
export const MIN_MEMORY_ROOM = 256 * 1024 * 1024;

/** `memory` when it is a writable tmpfs with at least `minRoom` bytes free, else `fallback`. */
export function defaultWorkRoot(fallback: string, memory = MEMORY_DIR, minRoom = MIN_MEMORY_ROOM): string {
  try {
    const fs = statfsSync(memory);
    if (fs.type !== TMPFS_MAGIC || fs.bavail * fs.bsize < minRoom) return fallback;
    accessSync(memory, constants.W_OK);
    return memory;
  } catch {
    return fallback;
  }
}

/** The directories every step gets a private view of: /tmp, and `memory` where the host has it. */
export function stepPrivateRoots(memory = MEMORY_DIR): string[] {
  return existsSync(memory) ? ["/tmp", memory] : ["/tmp"];
}

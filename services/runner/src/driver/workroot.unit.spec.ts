import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultWorkRoot, stepPrivateRoots } from "./workroot.js";

describe("the process driver's default work root", () => {
  it("is /dev/shm, a writable tmpfs, when it has the room asked for", () => {
    expect(defaultWorkRoot("/var/tmp", "/dev/shm", 0)).toBe("/dev/shm");
  });

  it("is the fallback when the memory filesystem has less room than asked (Docker's 64 MiB /dev/shm)", () => {
    expect(defaultWorkRoot("/var/tmp", "/dev/shm", Number.MAX_SAFE_INTEGER)).toBe("/var/tmp");
  });

  it("is the fallback when the directory is not a tmpfs, or not there", () => {
    expect(defaultWorkRoot("/var/tmp", "/proc", 0)).toBe("/var/tmp");
    expect(defaultWorkRoot("/var/tmp", "/no/such/dir", 0)).toBe("/var/tmp");
  });
});

describe("the roots every step gets a private view of", () => {
  it("are /tmp and the memory filesystem where the host has it", () => {
    expect(stepPrivateRoots("/dev/shm")).toEqual(["/tmp", "/dev/shm"]);
    const gone = mkdtempSync(join(tmpdir(), "roots-"));
    rmSync(gone, { recursive: true });
    expect(stepPrivateRoots(gone)).toEqual(["/tmp"]);
  });
});

import type * as pb from "@ephemera/proto";
import { planStep } from "./init.js";
import { parseStepReport } from "./report.js";
import { PrivateViewError, privateViewDirs, readOnlyRemounts } from "./views.js";

const input = (name: string, present: boolean, value: string, env: string, path: string): pb.ResolvedInput =>
  ({ name, present, value: Buffer.from(value), env, path });

describe("init plan", () => {
  const plan = planStep({
    script: "#!/bin/bash\necho hi\n",
    inputs: [
      input("db-name", true, "orders", "DB_NAME", ""),
      input("config", true, "a=1", "", "/etc/app/config"),
      input("token", true, "s3cret", "TOKEN", "token.txt"),
      input("tags", false, "", "TAGS", "/work/tags"),
    ],
    outputs: [{ name: "host", valueFromPath: "/work/out/host", description: "", type: "" }, { name: "port", valueFromPath: "port", description: "", type: "" }],
  });

  it("sets env vars and files of present inputs only; relative paths live under /tmp", () => {
    expect(plan.env).toEqual({ DB_NAME: "orders", TOKEN: "s3cret" });
    expect(plan.files.map((f) => [f.path, f.value.toString()])).toEqual([["/etc/app/config", "a=1"], ["/tmp/token.txt", "s3cret"]]);
    expect(plan.outputs).toEqual([{ name: "host", path: "/work/out/host" }, { name: "port", path: "/tmp/port" }]);
  });

  it("gives private views to every directory holding a declared path, parents first, /tmp last", () => {
    const dirs = privateViewDirs({
      files: [{ path: "/work/a/b/in", value: Buffer.alloc(0) }, { path: "/tmp/x/y", value: Buffer.alloc(0) }],
      outputs: [{ name: "o", path: "/work/a/out" }, { name: "p", path: "/srv/z/out" }, { name: "q", path: "/work/a/b/q" }],
    }, "/tmp/ephemera/p/runs/r1");
    expect(dirs).toEqual(["/srv/z", "/work/a", "/work/a/b", "/tmp"]);
  });

  it("refuses a path directly under / and a directory that would hide the run directory", () => {
    const out = (path: string) => ({ files: [], outputs: [{ name: "o", path }] });
    expect(() => privateViewDirs(out("/value"), "/tmp/r")).toThrow(PrivateViewError);
    expect(() => privateViewDirs(out("/var/lib/x"), "/var/lib/ephemera/r")).toThrow(/holds the runner's work directory/);
  });
});

describe("read-only host", () => {
  const mountinfo = [
    "1 0 0:1 / / rw,relatime - overlay overlay rw",
    "2 1 0:2 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
    "3 1 0:3 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro",
    "4 1 0:4 / /dev/shm rw,nosuid,nodev - tmpfs shm rw",
    "5 1 0:5 / /tmp rw,nosuid - tmpfs tmp rw",
    "6 5 0:6 / /tmp rw,nosuid,nodev - tmpfs ephemera-step rw,size=1024k",
    "7 1 0:7 / /work/my\\040out rw,relatime - tmpfs ephemera-step rw",
    "8 1 0:1 /var/lib/ephemera/runs/r1 /var/lib/ephemera/runs/r1 rw,relatime - overlay overlay rw",
    "",
  ].join("\n");

  it("remounts every mount read-only keeping its flags, but the views, the run directory and what lies under them", () => {
    expect(readOnlyRemounts(mountinfo, ["/work/my out", "/tmp", "/var/lib/ephemera/runs/r1"])).toEqual([
      { path: "/", options: "remount,bind,ro,relatime" },
      { path: "/proc", options: "remount,bind,ro,nosuid,nodev,noexec,relatime" },
      { path: "/dev/shm", options: "remount,bind,ro,nosuid,nodev" },
    ]);
  });

  it("takes a mount point listed twice as the mount on top", () => {
    const remounts = readOnlyRemounts(mountinfo, ["/work/my out", "/var/lib/ephemera/runs/r1"]);
    expect(remounts.find((r) => r.path === "/tmp")).toEqual({ path: "/tmp", options: "remount,bind,ro,nosuid,nodev" });
  });
});

describe("step report", () => {
  it("parses reports and rejects anything else", () => {
    expect(parseStepReport('{"outcome":"succeeded","outputs":[{"name":"host","size":3}]}')).toEqual({
      outcome: "succeeded", outputs: [{ name: "host", size: 3 }],
    });
    expect(parseStepReport('{"outcome":"failed","reason":"Error","exitCode":3,"message":"m"}')).toMatchObject({ exitCode: 3 });
    expect(parseStepReport("{")).toBeUndefined();
    expect(parseStepReport('{"outcome":"maybe"}')).toBeUndefined();
  });
});

import type * as pb from "@ephemera/proto";
import { planStep } from "./init.js";
import { parseStepReport } from "./report.js";
import { PrivateViewError, privateViewDirs } from "./views.js";

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

  it("gives every step its roots last (/tmp, then /dev/shm): a path within one needs no view, and may sit beside the run directories there", () => {
    const dirs = privateViewDirs({
      files: [{ path: "/dev/shm/in", value: Buffer.alloc(0) }],
      outputs: [{ name: "o", path: "/dev/shm/a/out" }, { name: "p", path: "/srv/out" }, { name: "q", path: "/tmp/q" }],
    }, "/dev/shm/ephemera/p/runs/r1", ["/tmp", "/dev/shm"]);
    expect(dirs).toEqual(["/srv", "/tmp", "/dev/shm"]);
    // Without /dev/shm among the roots, a view of it would hide the run directory.
    expect(() => privateViewDirs({ files: [], outputs: [{ name: "o", path: "/dev/shm/out" }] }, "/dev/shm/ephemera/p/runs/r1"))
      .toThrow(/its directory \/dev\/shm holds the runner's work directory/);
  });

  it("refuses a path directly under / and a directory that would hide the run directory", () => {
    const out = (path: string) => ({ files: [], outputs: [{ name: "o", path }] });
    expect(() => privateViewDirs(out("/value"), "/tmp/r")).toThrow(PrivateViewError);
    expect(() => privateViewDirs(out("/var/lib/x"), "/var/lib/ephemera/r")).toThrow(/holds the runner's work directory/);
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

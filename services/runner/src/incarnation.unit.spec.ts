import { spawn } from "node:child_process";
import { once } from "node:events";
import { deadHere, incarnation } from "./incarnation.js";

describe("runner incarnations", () => {
  it("tells a dead incarnation of this host from a live one, itself and another host's", async () => {
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await once(child, "exit");
    const gone = deadHere("host-a");
    expect(gone(incarnation("host-a", child.pid!))).toBe(true);
    expect(gone(incarnation("host-a", process.ppid))).toBe(false);
    expect(gone(incarnation("host-a", process.pid))).toBe(false);
    expect(gone(incarnation("host-b", child.pid!))).toBe(false);
    expect(gone("runner-a")).toBe(false);
  });
});

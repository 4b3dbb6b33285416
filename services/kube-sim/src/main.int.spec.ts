// `pnpm kube-sim` on an address that is taken, or with a variable it cannot read, says so in one line and exits 1.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startKubeSim, type KubeSim } from "./start.js";

const run = promisify(execFile);

it("refuses an address in use with one line naming it and the variable to change", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kube-sim-main-"));
  let first: KubeSim | undefined;
  try {
    first = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(dir, "a"), dataDir: join(dir, "data-a") });
    const address = first.url.replace("http://", "");
    const second = await run(process.execPath, [join(__dirname, "..", "dist", "main.js")], {
      env: { ...process.env, EPHEMERA_KUBE_SIM_LISTEN: address, EPHEMERA_KUBE_SIM_KUBECONFIG: join(dir, "b") }, timeout: 15_000,
    }).then(() => ({ code: 0, stderr: "" }), (e: { code: number; stderr: string }) => e);
    expect(second.code).toBe(1);
    expect(second.stderr.trim()).toBe(`kube-sim cannot start: ${address} is in use (another kube-sim? set EPHEMERA_KUBE_SIM_LISTEN to another address)`);
  } finally {
    await first?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

it("refuses an unknown runtime or image map entry with one line naming the variable and the rule", async () => {
  const start = (env: Record<string, string>) => run(process.execPath, [join(__dirname, "..", "dist", "main.js")], {
    env: { ...process.env, EPHEMERA_KUBE_SIM_LISTEN: "127.0.0.1:0", ...env }, timeout: 15_000,
  }).then(() => ({ code: 0, stderr: "" }), (e: { code: number; stderr: string }) => e);
  const runtime = await start({ EPHEMERA_KUBE_SIM_RUNTIME: "vm" });
  expect(runtime.code).toBe(1);
  expect(runtime.stderr.trim()).toBe('kube-sim cannot start: EPHEMERA_KUBE_SIM_RUNTIME must be one of docker, process (or unset: docker when Docker answers), not "vm"');
  const images = await start({ EPHEMERA_KUBE_SIM_IMAGES: "=debian:bookworm-slim" });
  expect(images.code).toBe(1);
  expect(images.stderr.trim()).toBe('kube-sim cannot start: EPHEMERA_KUBE_SIM_IMAGES entry "=debian:bookworm-slim" is neither IMAGE=HOSTDIR:MOUNTPATH nor IMAGE=LOCAL_IMAGE');
});

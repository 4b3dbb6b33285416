// `pnpm demo:local` as a user runs it (examples/demo-local.sh --no-build), under its own
// prefix, free ports and workstation subnet: the workstation is a network namespace that
// reaches this machine only at the tunnel's address. Through the preview gateway, the
// sandbox's endpoint URL reaches the backend running as a plain process on the workstation
// (through the baseline frontend, its router and the tunnel), the baseline URL the baseline;
// kill -9 of `eph local connect` turns the local workload Disconnected and its rule off
// within 15 s, a new connect brings both back; the workstation reaches the cluster's backend
// through its local proxy; every tunnel connection is in `eph events` with byte counts.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describeWithDocker } from "../support/docker.js";
import { uniquePrefix } from "../support/servers.js";
import { freePort } from "../support/stack.js";

const ROOT = join(__dirname, "..", "..");
const run = promisify(execFile);

describeWithDocker("pnpm demo:local", () => {
  it("serves a sandbox's backend from a workstation through the tunnel, survives kill -9 and reconnects, to 'demo finished'", async () => {
    const prefix = uniquePrefix("demol");
    const ports = ["API", "IOCONTEXT", "ROUTES", "GATEWAY", "WEBHOOK", "TUNNEL", "KUBE_SIM"];
    const env: NodeJS.ProcessEnv = { ...process.env, EPHEMERA_PREFIX: prefix };
    for (const p of ports) env[`DEMO_${p}_PORT`] = String(await freePort());
    const demo = await run("bash", [join(ROOT, "examples/demo-local.sh"), "--no-build"], { cwd: ROOT, env, timeout: 420_000, maxBuffer: 64 << 20 })
      .catch((err: Error & { stdout?: string; stderr?: string; code?: unknown; signal?: unknown }) => {
        // What it said last first (the services' log tails, printed by its cleanup): a long message is cut in the middle.
        const last = (text = "", n = 80) => text.split("\n").slice(-n).join("\n");
        throw new Error(`the demo failed (exit ${String(err.code)}${err.signal ? `, ${String(err.signal)}` : ""}); the last of what it said:\n${last(err.stderr)}\n--- its output:\n${last(err.stdout, 30)}`);
      });
    const out = demo.stdout.split("\n");
    const said = demo.stderr.split("\n");
    const workstation = '{"service":"frontend","version":"baseline","backend":{"service":"backend","version":"workstation"}}';
    const baseline = '{"service":"frontend","version":"baseline","backend":{"service":"backend","version":"baseline"}}';
    // Endpoint URL → the workstation; baseline URL → the baseline; after kill -9 → the baseline;
    // connected again → the workstation.
    expect(out.filter((l) => l.startsWith('{"service":"frontend"'))).toEqual([workstation, baseline, baseline, workstation]);
    // Through the workstation's HTTP proxy, by the Service's cluster name: the baseline backend.
    expect(out).toContain('{"service":"backend","version":"baseline"}');
    expect(out.filter((l) => l.startsWith("local workload backend-local: "))).toEqual([
      "local workload backend-local: Connected", "local workload backend-local: Disconnected",
      "local workload backend-local: Connected", "local workload backend-local: Disconnected",
    ]);
    // The audit log: two sessions (one lost to kill -9, one ended by disconnect), each
    // connection of the sandbox's requests to the workstation with bytes both ways, and the
    // workstation's call through the proxy.
    const audit = out.filter((l) => l.startsWith("ephemera.tunnel."));
    expect(audit.filter((l) => l.startsWith("ephemera.tunnel.session_opened.v1"))).toHaveLength(2);
    expect(audit.filter((l) => l.startsWith("ephemera.tunnel.session_closed.v1")).map((l) => l.split(/\s+/)[1])).toEqual(["lost", "disconnect"]);
    const toWorkstation = audit.filter((l) => /^ephemera\.tunnel\.connection_closed\.v1\s+to_workstation\s+local-demo\s/.test(l));
    expect(toWorkstation.length).toBeGreaterThanOrEqual(2);
    for (const l of toWorkstation) expect(l).toMatch(/\s[1-9]\d*\s+[1-9]\d*$/);
    expect(audit.some((l) => /^ephemera\.tunnel\.connection_closed\.v1\s+to_cluster\s+\S*\s*backend\.demo-routing\.svc:8080\s+[1-9]\d*\s+[1-9]\d*$/.test(l))).toBe(true);
    expect(said).toContain("demo finished");
  }, 480_000);
});

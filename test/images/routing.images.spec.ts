// `pnpm demo:routing` as a user runs it (examples/demo-routing.sh --no-build), under its own
// prefix and free ports: on the simulated cluster (pods as Docker containers, Services with
// ClusterIPs and DNS), a request through the preview gateway with a sandbox's endpoint URL
// reaches the fork of backend through the baseline frontend (the router the webhook injected
// beside backend sent it on), the baseline URL reaches the baseline, and after the delete the
// URL answers 404 and the same key reaches the baseline. A route group of the sandbox's label
// reaches the fork with its own key, and the baseline once the sandbox is gone.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describeWithDocker } from "../support/docker.js";
import { uniquePrefix } from "../support/servers.js";
import { freePort } from "../support/stack.js";

const ROOT = join(__dirname, "..", "..");
const run = promisify(execFile);

describeWithDocker("pnpm demo:routing", () => {
  it("routes a sandbox's requests to its fork and the rest to the baseline, to 'demo finished'", async () => {
    const prefix = uniquePrefix("demor");
    const ports = ["API", "IOCONTEXT", "ROUTES", "GATEWAY", "WEBHOOK", "KUBE_SIM"];
    const env: NodeJS.ProcessEnv = { ...process.env, EPHEMERA_PREFIX: prefix };
    for (const p of ports) env[`DEMO_${p}_PORT`] = String(await freePort());
    const demo = await run("bash", [join(ROOT, "examples/demo-routing.sh"), "--no-build"], { cwd: ROOT, env, timeout: 420_000, maxBuffer: 64 << 20 })
      .catch((err: Error & { stdout?: string; stderr?: string }) => { throw new Error(`the demo failed: ${err.message}\n${err.stdout}\n${err.stderr}`); });
    const out = demo.stdout.split("\n");
    const said = demo.stderr.split("\n");
    // Both baseline pods got the router and its init container from the webhook.
    expect(out.filter((l) => /^(backend|frontend)-\S+\s+\S+,ephemera-router\s+ephemera-router-init$/.test(l))).toHaveLength(2);
    // Endpoint URL → the fork; the route group's URL → the fork; baseline URL → the baseline; the key
    // straight to frontend → the fork; after the delete → 404, the key → the baseline, and the
    // route group's URL (no member left) → the baseline.
    const fork = '{"service":"frontend","version":"baseline","backend":{"service":"backend","version":"v2"}}';
    const baseline = '{"service":"frontend","version":"baseline","backend":{"service":"backend","version":"baseline"}}';
    const answers = out.filter((l) => l.startsWith('{"service":"frontend"'));
    expect(answers).toEqual([fork, fork, baseline, fork, baseline, baseline]);
    // The group's status, as `eph routegroup get` shows it, names the sandbox it routes to.
    expect(out.some((l) => /^\s+- Deployment demo-routing\/backend$/.test(l))).toBe(true);
    expect(out).toContain("route group routing-group deleted");
    expect(out.some((l) => /^no endpoint web of a sandbox with routing key [a-z0-9]+ \(deleted, or never made\)$/.test(l))).toBe(true);
    expect(said).toContain("demo finished");
  }, 480_000);
});

// Each service passes EPHEMERA_STREAM_REPLICAS to the streams it creates: on this machine's
// single nats-server three replicas cannot be had, so each service, started on a fresh
// prefix with 3, refuses to start with the server's answer (and with 1 it would start:
// every other suite shows that).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { NATS_URL, REDIS_URL, removePrefix, uniquePrefix } from "../support/servers.js";
import { serviceEnv, SERVICE_NAMES } from "../support/services.js";

const ROOT = join(__dirname, "..", "..");

function run(service: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [join(ROOT, "services", service, "dist", "main.js")], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    p.stdout.on("data", (d: Buffer) => (output += d.toString()));
    p.stderr.on("data", (d: Buffer) => (output += d.toString()));
    // A service that starts after all would run on: bounded, so the test fails rather than hangs.
    const bound = setTimeout(() => p.kill("SIGKILL"), 30_000);
    p.on("exit", (code) => {
      clearTimeout(bound);
      resolve({ code, output });
    });
  });
}

describe("EPHEMERA_STREAM_REPLICAS", () => {
  it.each(SERVICE_NAMES)("%s creates its streams with it: three replicas on one server are refused, and the service says so", async (service) => {
    const prefix = uniquePrefix("repl");
    try {
      const { code, output } = await run(service, serviceEnv({
        NATS_URL, REDIS_URL, EPHEMERA_PREFIX: prefix, EPHEMERA_STREAM_REPLICAS: "3",
        EPHEMERA_API_LISTEN: "127.0.0.1:0", EPHEMERA_IOCONTEXT_LISTEN: "127.0.0.1:0", EPHEMERA_RUNNER_WORKDIR: `/var/tmp/${prefix}`,
        EPHEMERA_SIGNING_KEY: "a-signing-key-of-at-least-32-bytes-for-tests",
      }));
      expect(code).toBe(1);
      expect(output).toContain("replicas > 1 not supported in non-clustered mode"); // the server's words
    } finally {
      await removePrefix(prefix);
    }
  }, 40_000);
});

// NATS and Redis with credentials: the services authenticate (NATS user/password, a Redis
// ACL user), a wrong password stops a service with the server's refusal and never the
// password, and a step gets none of it: not in its environment, and NATS and Redis refuse
// it when it talks to them directly. Own nats-server and redis-server on free ports.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { Redis } from "ioredis";
import { waitFor } from "@ephemera/kit";
import { ephOk, type Eph } from "../support/eph.js";
import { startOwnStack, type OwnStack } from "../support/own-stack.js";
import { uniquePrefix } from "../support/servers.js";
import { SERVICE_NAMES, serviceEnv, type Services } from "../support/services.js";

const FIXTURES = join(__dirname, "fixtures");
const ROOT = join(__dirname, "..", "..");
const NATS_PASSWORD = `nats-${uniquePrefix("pw")}`;
const REDIS_PASSWORD = `redis-${uniquePrefix("pw")}`;

describe("NATS and Redis with credentials (own servers, services as processes)", () => {
  let stack: OwnStack | undefined;
  let nats: OwnStack["nats"];
  let redis: OwnStack["redis"];
  let services: Services;
  let eph: Eph;
  let env: Record<string, string>;

  beforeAll(async () => {
    stack = await startOwnStack("creds", {
      natsFlags: () => ["--user", "ephemera", "--pass", NATS_PASSWORD],
      // The default user is off: only ephemera's ACL user gets in.
      redisFlags: ["--user", "default", "off", "--user", "ephemera", "on", `>${REDIS_PASSWORD}`, "~*", "&*", "+@all"],
      // The step shares the host's network here, chosen knowingly: the credentials are what is tested.
      env: {
        NATS_USER: "ephemera", NATS_PASSWORD, REDIS_USERNAME: "ephemera", REDIS_PASSWORD, LOG_LEVEL: "debug", EPHEMERA_STEP_NETWORK: "host",
      },
    });
    ({ nats, redis, services, eph, env } = stack);
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  it("runs a sandbox with every service authenticated; the step gets no credential and is refused by NATS and Redis", async () => {
    await ephOk(eph, ["plugin", "apply", "-f", join(FIXTURES, "probe-plugin.yaml")]);
    await ephOk(eph, [
      "sandbox", "apply", "-f", join(FIXTURES, "probe-sandbox.yaml"),
      "--set", `natsport=${nats.port}`, "--set", `redisport=${redis.port}`, "--wait-timeout", "60s",
    ], { timeoutMs: 70_000 });
    const doc = JSON.parse((await ephOk(eph, ["sandbox", "get", "probe", "-o", "json", "--show-outputs"])).stdout) as {
      status: { ready: boolean };
      resources: Array<{ outputs: Record<string, { value?: string }> }>;
    };
    expect(doc.status.ready).toBe(true);
    const out = doc.resources[0]!.outputs;
    const names = out["probe.envnames"]!.value!.trim().split(" ");
    expect(names).toEqual(expect.arrayContaining(["PATH", "HOME"]));
    expect(names.filter((n) => /^(NATS|REDIS)_|PASSWORD|TOKEN/.test(n))).toEqual([]);
    expect(out["probe.nats"]!.value).toMatch(/^-ERR 'Authorization Violation'/);
    expect(out["probe.redis"]!.value).toMatch(/^-NOAUTH /);
    // The IO context is connected to Redis as its ACL user (the default user is off: no other way in), and its heartbeat is answered.
    const admin = new Redis(redis.url, { username: "ephemera", password: REDIS_PASSWORD });
    try {
      const self = await admin.client("ID");
      // Fails on its deadline unless such a client shows.
      await waitFor(async () => {
        const clients = String(await admin.client("LIST")).trim().split("\n").filter((line) => !line.startsWith(`id=${self} `));
        return clients.some((line) => / user=ephemera /.test(line) && / cmd=ping /.test(line));
      }, { timeoutMs: 10_000, intervalMs: 100, what: "the IO context's heartbeat on Redis, as the ACL user" });
    } finally {
      admin.disconnect();
    }
  }, 90_000);

  it("never writes a password to a service's log", () => {
    for (const s of SERVICE_NAMES) {
      const lines = services.log(s).lines().map((l) => l.line).join("\n");
      expect(lines.length).toBeGreaterThan(0);
      expect(lines).not.toContain(NATS_PASSWORD);
      expect(lines).not.toContain(REDIS_PASSWORD);
    }
  });

  it("a service given a wrong NATS password exits 1 with the server's refusal, without the password", async () => {
    const wrong = `wrong-${uniquePrefix("pw")}`;
    const r = await runService("scheduler", { ...env, NATS_PASSWORD: wrong, EPHEMERA_SCHEDULER_LISTEN: "127.0.0.1:0" });
    expect(r.code).toBe(1);
    expect(r.output).toMatch(/cannot connect to NATS at nats:\/\/127\.0\.0\.1:\d+ \(as user ephemera\): .*[Aa]uthorization/);
    expect(r.output).not.toContain(wrong);
  }, 30_000);

  it("a service given half a credential refuses to start, naming the variables", async () => {
    const r = await runService("sandbox", { ...env, NATS_PASSWORD: "" });
    expect(r.code).toBe(1);
    expect(r.output).toContain("NATS_USER and NATS_PASSWORD go together");
  }, 30_000);
});

function runService(service: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(ROOT, "services", service, "dist", "main.js")], {
      env: serviceEnv(env), stdio: ["ignore", "pipe", "pipe"], timeout: 25_000, killSignal: "SIGKILL",
    });
    let output = "";
    p.stdout.on("data", (d: Buffer) => (output += d.toString()));
    p.stderr.on("data", (d: Buffer) => (output += d.toString()));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, output }));
  });
}

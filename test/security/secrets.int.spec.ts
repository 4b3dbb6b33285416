// A secret output value appears nowhere but where it is asked for: a sandbox whose steps
// make, pass and read a secret (no script prints it) runs on its own NATS and Redis, and
// everything the run produced is searched for the value, as text and base64: every
// service's log, every event as stored, `eph events`, `eph sandbox get`, the steps' logs
// and the IO context's refusals. `sandbox get --show-outputs` does show it: proof the
// value searched for is the real one.
import { join } from "node:path";
import { tmpdir } from "node:os";
import { connectNats, JetStreamEventStore } from "@ephemera/eventstore";
import { fetchStepInputs, ioContextClient, storeStepOutputs } from "../../services/io-agent/src/index.js";
import { defaultSigningKeyFile, signCapability, signingKeys } from "@ephemera/kit";
import { ephOk, type Eph } from "../support/eph.js";
import { startOwnStack, type OwnStack } from "../support/own-stack.js";
import { uniquePrefix } from "../support/servers.js";
import { SERVICE_NAMES, type Services } from "../support/services.js";

const FIXTURES = join(__dirname, "fixtures");

describe("a secret output value stays secret (own servers, services as processes)", () => {
  let stack: OwnStack | undefined;
  let nats: OwnStack["nats"];
  let services: Services;
  let eph: Eph;
  let prefix: string;
  const seed = uniquePrefix("s");
  let secret: string;
  let routingKey: string;
  let ioAddress: string;

  beforeAll(async () => {
    stack = await startOwnStack("sec", { env: { LOG_LEVEL: "debug" } });
    ({ nats, services, eph, prefix, ioAddress } = stack);
    await ephOk(eph, ["plugin", "apply", "-f", join(FIXTURES, "secret-plugin.yaml")]);
    await ephOk(eph, ["sandbox", "apply", "-f", join(FIXTURES, "secret-sandbox.yaml"), "--set", `seed=${seed}`, "--wait-timeout", "60s"], { timeoutMs: 70_000 });
    const shown = JSON.parse((await ephOk(eph, ["sandbox", "get", "keeper", "-o", "json", "--show-outputs"])).stdout) as {
      routingKey: string; resources: Array<{ outputs: Record<string, { value?: string }> }>;
    };
    secret = shown.resources[0]!.outputs["mint.password"]!.value!;
    routingKey = shown.routingKey;
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  /** Where the secret shows in `text`, as text or base64 (of the whole value). */
  const leaks = (where: string, text: string) =>
    [secret, Buffer.from(secret).toString("base64")].filter((form) => text.includes(form)).map(() => where);

  it("is the value the step made (so the searches below look for the real thing)", () => {
    expect(secret).toMatch(new RegExp(`^pw-${seed}-[a-z0-9]+$`));
  });

  it("appears in no event as stored, nor in eph events", async () => {
    const nc = await connectNats(nats.url, "secrets-test");
    try {
      const store = await JetStreamEventStore.open(nc, { prefix });
      const all: string[] = [];
      const sub = store.follow({}, (c) => void all.push(...c.events.map((e) => JSON.stringify(e))));
      await sub.caughtUp;
      await sub.stop();
      expect(all.some((e) => e.includes("ephemera.steprun.succeeded.v1"))).toBe(true);
      expect(leaks("stored events", all.join("\n"))).toEqual([]);
    } finally {
      await nc.close();
    }
    const events = await ephOk(eph, ["events", "-o", "json"]);
    expect(events.stdout).toContain("mint");
    expect(leaks("eph events", events.stdout + events.stderr)).toEqual([]);
  });

  it("appears in no eph sandbox get without --show-outputs, and in no step log", async () => {
    for (const args of [["sandbox", "get", "keeper", "-o", "json"], ["sandbox", "get", "keeper"], ["sandbox", "list", "-o", "json"]]) {
      const r = await ephOk(eph, args);
      expect(leaks(args.join(" "), r.stdout + r.stderr)).toEqual([]);
    }
    for (const step of ["mint", "use"]) {
      const r = await ephOk(eph, ["logs", "--sandbox", "keeper", "--resource", "vault", "--step", step]);
      expect(r.stdout).toMatch(step === "mint" ? /minted a password of \d+ bytes/ : /used it/);
      expect(leaks(`logs of ${step}`, r.stdout + r.stderr)).toEqual([]);
    }
  });

  it("appears in no refusal of the IO context, even one that carries it", async () => {
    // A valid token for the finished mint run (the machine's key file), trying to change its output to something close to it.
    const [key] = signingKeys({}, defaultSigningKeyFile(tmpdir(), prefix));
    const mint = `${routingKey}.vault.create.mint.1`;
    const token = await signCapability(key!, { run: mint, inputs: ["param:seed"], outputs: ["password"] }, 60_000);
    const client = ioContextClient(ioAddress);
    try {
      const changed = await storeStepOutputs(client, mint, token, [{ name: "password", value: Buffer.from(`${secret}!`), size: secret.length + 1, sha256: "" }], { retry: false })
        .catch((e: unknown) => e as Error);
      expect(changed).toBeInstanceOf(Error);
      expect((changed as Error).message).toMatch(/has ended: its outputs can no longer change/);
      expect(leaks("the refusal", String((changed as Error).message))).toEqual([]);
      const forged = await fetchStepInputs(client, `${routingKey}.vault.create.use.1`, token, { retry: false }).catch((e: unknown) => e as Error);
      expect((forged as Error).message).toMatch(/token is for another run/);
      expect(leaks("the refusal", String((forged as Error).message))).toEqual([]);
    } finally {
      client.close();
    }
  });

  it("is read by the delete step, and afterwards appears in no service's log", async () => {
    await ephOk(eph, ["sandbox", "delete", "keeper", "--wait-timeout", "60s"], { timeoutMs: 70_000 });
    const revoke = await ephOk(eph, ["events", "-o", "json", "--type", "ephemera.steprun.succeeded.v1"]);
    expect(revoke.stdout).toContain(".vault.delete.revoke.");
    for (const s of SERVICE_NAMES) {
      const lines = services.log(s).lines().map((l) => l.line).join("\n");
      expect(lines.length).toBeGreaterThan(0);
      expect(leaks(`${s} log`, lines)).toEqual([]);
    }
  }, 90_000);
});

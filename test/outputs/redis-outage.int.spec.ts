// Steps go on while the IO context's Redis is stalled (SIGSTOP) or stopped: a 4-step chain
// through the real scheduler, runner and IO context is ready well within one Redis command
// timeout (30 s here), every output right, since Redis is only a cache of the output
// journal. Once Redis is back the IO context uses it again and refills what it missed.
// A redis-server of the test's own; the machine's shared one is never touched.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { call, grpc, waitFor } from "@ephemera/kit";
import { openRedis, type Redis } from "../../services/iocontext/src/index.js";
import { Api } from "../../services/cli/src/api.js";
import { startCore, type Core } from "../support/core.js";
import { startOwnRedis, type OwnServer } from "../support/own-servers.js";
import { tokenForStep } from "../support/keys.js";

const COMMAND_TIMEOUT_MS = 30_000;
/** The chain takes well under a second with Redis up: this is far below one command timeout. */
const READY_WITHIN_MS = 8_000;
const CHAIN = ["s1", "s2", "s3", "s4"];

const sh = (body: string) => `#!/bin/sh\n${body}\n`;
/** s1 writes "a"; each next step appends its letter to what the one before wrote. */
const chain = pb.ResourcePlugin.fromPartial({
  name: "chain4@1.0.0",
  spec: {
    description: "a value passed along four steps",
    runner: { image: "test" },
    create: CHAIN.map((name, i) => i === 0
      ? { name, outputs: [{ name: "v", valueFromPath: "/tmp/v" }], script: sh("printf a > /tmp/v") }
      : {
        name,
        inputs: [{ name: "v", valueFromStep: { name: CHAIN[i - 1]!, output: "v" }, as: { env: "", path: "/work/v" } }],
        outputs: [{ name: "v", valueFromPath: "/tmp/v" }],
        script: sh(`{ cat /work/v; printf ${"abcd"[i]!}; } > /tmp/v`),
      }),
  },
});
const EXPECTED = [["s1.v", "a"], ["s2.v", "ab"], ["s3.v", "abc"], ["s4.v", "abcd"]];

describe("a 4-step chain while the IO context's Redis is down (real scheduler, runner, IO context)", () => {
  let dir: string;
  let own: OwnServer & { url: string };
  let redis: Redis;
  let core: Core;
  let api: Api;
  let io: pb.IOContextClient;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "redis-outage-chain-"));
    own = await startOwnRedis(join(dir, "redis"));
  });
  afterAll(async () => {
    await own?.stop("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    if (!own.running) await own.start();
    // Long, so that a call waiting for Redis to answer would show.
    redis = openRedis(own.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: COMMAND_TIMEOUT_MS });
    redis.on("error", () => undefined); // expected while the server is down
    core = await startCore({ redis });
    api = new Api(core.address, { timeoutMs: 10_000 });
    io = new pb.IOContextClient(core.iocontext, grpc.credentials.createInsecure());
    await api.applyPlugin(chain);
    // One chain with Redis up: the cache is in use before it goes.
    await readyChain("warm", 30_000);
    expect(await redis.exists(`${core.tag}:io:${await runOf("warm", "s1")}`)).toBe(1);
  });

  afterEach(async () => {
    if (own.pid) process.kill(own.pid, "SIGCONT");
    io.close();
    await core.stop();
    redis.disconnect();
  });

  const outputsOf = async (name: string) =>
    (await api.getSandbox(name, true)).resources[0]!.outputs.map((o) => [o.key, Buffer.from(o.value ?? []).toString()]);
  const runOf = async (name: string, step: string) =>
    (await api.getSandbox(name)).resources[0]!.steps.find((s) => s.name === step)!.runId;

  /** Creates a chain sandbox and waits (within `withinMs`) until it is ready. */
  async function readyChain(name: string, withinMs: number): Promise<void> {
    await api.applySandbox(pb.Sandbox.fromPartial({ name, spec: { cluster: "local", resources: [{ name: "r", plugin: "chain4" }] } }));
    await waitFor(async () => {
      const status = (await api.getSandbox(name)).status;
      if (status?.reason === "ResourceFailed") throw new Error(`sandbox ${name} failed: ${status.message}`);
      return status?.ready;
    }, { timeoutMs: withinMs, intervalMs: 50, what: `sandbox ${name} to be ready` });
  }

  /** Once Redis answers again, a step's read of its input puts the value it missed back in the cache. */
  async function refilled(name: string): Promise<void> {
    const reader = await runOf(name, "s2");
    const producerKey = `${core.tag}:io:${await runOf(name, "s1")}`;
    const token = await tokenForStep(reader, chain.spec!.create[1]!);
    await waitFor(async () => {
      const res = await call(io.getStepInputs.bind(io), { runId: reader, token }, 10_000);
      expect(res.inputs.map((i) => [i.name, i.value.toString()])).toEqual([["v", "a"]]);
      return (await redis.hexists(producerKey, "v").catch(() => 0)) === 1;
    }, { timeoutMs: 15_000, intervalMs: 200, what: "the input's value to be cached again" });
  }

  it("with Redis stalled (SIGSTOP): ready within seconds, every output right; then the cache is refilled", async () => {
    process.kill(own.pid!, "SIGSTOP");
    try {
      await readyChain("stalled", READY_WITHIN_MS);
      expect(await outputsOf("stalled")).toEqual(EXPECTED);
    } finally {
      process.kill(own.pid!, "SIGCONT");
    }
    await refilled("stalled");
  }, 90_000);

  it("with Redis stopped: ready within seconds, every output right; started again (empty), the cache is refilled", async () => {
    await own.stop("SIGKILL");
    await readyChain("stopped", READY_WITHIN_MS);
    expect(await outputsOf("stopped")).toEqual(EXPECTED);
    await own.start();
    await refilled("stopped");
  }, 90_000);
});

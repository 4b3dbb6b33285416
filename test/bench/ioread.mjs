// The IO context read: a step's inputs (GetStepInputs with a signed capability, as the agent
// sends it) against an empty unary call (health Check) on the same channel, alternated call
// by call so load from elsewhere on the machine falls on both alike. Warm: the same run read
// again (its producer's outputs as a step reading them meets them). Goal: at most 1.25×.
// `pnpm bench` measures it as a row; alone, on a fresh stack (own NATS, Redis and services):
//   node test/bench/ioread.mjs [samples] [reads]     (after pnpm build)
import { mkdtempSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Api } from "../../services/cli/dist/api.js";
import * as pb from "../../services/proto/dist/index.js";
import { grpc } from "../../services/kit/dist/client.js";
import { signCapability, signingKey, stepCapability } from "../../services/kit/dist/capability.js";
import { startServers, startStack, stopAll } from "./system.mjs";
import { chainPlugin, createAndWait, sandbox, watchReadiness } from "./workloads.mjs";

export const GOAL = 1.25;

/**
 * Step s2's inputs of a ready chain sandbox (`chain` steps), `samples` times `reads` calls of
 * each kind after one sample of warm-up; the mean of each sample's calls, in ms.
 */
export async function measureIoRead({ stack, api, sandboxName, chain, samples, reads }) {
  const view = await api.getSandbox(sandboxName);
  const step = view.resources[0].steps.find((s) => s.name === "s2");
  const spec = chainPlugin(chain).spec.create.find((s) => s.name === "s2");
  const token = await signCapability(signingKey(stack.signingKey()), stepCapability(step.runId, spec), 10 * 60_000);
  const client = new pb.IOContextClient(stack.iocontext, grpc.credentials.createInsecure());
  const deadline = () => ({ deadline: Date.now() + 5_000 });
  const inputs = () => new Promise((resolve, reject) => client.getStepInputs({ runId: step.runId, token }, new grpc.Metadata(), deadline(), (err, r) => (err ? reject(err) : resolve(r))));
  const empty = () => new Promise((resolve, reject) => client.makeUnaryRequest("/grpc.health.v1.Health/Check", (v) => v, (v) => v, Buffer.alloc(0), deadline(), (err, r) => (err ? reject(err) : resolve(r))));
  try {
    const first = await inputs();
    if (first.inputs[0]?.present !== true) throw new Error(`the IO context served no value for ${step.runId}'s input`);
    const sample = async () => {
      let b = 0;
      let m = 0;
      for (let i = 0; i < reads; i++) {
        let t = performance.now();
        await empty();
        b += performance.now() - t;
        t = performance.now();
        await inputs();
        m += performance.now() - t;
      }
      return [b / reads, m / reads];
    };
    const baseline = [];
    const measured = [];
    for (let i = 0; i <= samples; i++) {
      const [b, m] = await sample();
      if (i > 0) { baseline.push(b); measured.push(m); }
    }
    return { baseline, measured };
  } finally {
    client.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const samples = Number(process.argv[2] ?? 5);
  const reads = Number(process.argv[3] ?? 300);
  const scratch = mkdtempSync("/var/tmp/ephemera-bench-ioread-");
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  try {
    const servers = await startServers(`${scratch}/servers`);
    const stack = await startStack({ natsUrl: servers.natsUrl, redisUrl: servers.redisUrl, scratch, tag: "ioread" });
    const api = new Api(stack.api, { timeoutMs: 30_000 });
    const watch = watchReadiness(api);
    await api.applyPlugin(chainPlugin(3));
    await createAndWait(api, watch, sandbox("ioread", "chain3"), 60_000);
    const { baseline, measured } = await measureIoRead({ stack, api, sandboxName: "ioread", chain: 3, samples, reads });
    await watch.stop();
    const ratio = median(measured) / median(baseline);
    process.stdout.write(
      `IO context read, ${samples} samples of ${reads} calls each (mean per call):\n` +
      `  empty call     min ${Math.min(...baseline).toFixed(3)} ms  median ${median(baseline).toFixed(3)} ms\n` +
      `  step's inputs  min ${Math.min(...measured).toFixed(3)} ms  median ${median(measured).toFixed(3)} ms\n` +
      `  ratio ${ratio.toFixed(2)}× (goal ≤ ${GOAL}×: ${ratio <= GOAL ? "met" : "missed"})\n`,
    );
  } finally {
    await stopAll();
    rmSync(scratch, { recursive: true, force: true });
  }
}

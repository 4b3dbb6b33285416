// ephemera-agent: the program of a runner pod's init container (`init`) and sidecar
// (`sidecar`), and of a job runner group pod's main container (`job-agent`), bundled into
// one file (dist/agent.cjs) for the agent image. Its configuration comes from the
// environment (see config.ts, ../job/config.ts, docs/agent.md and docs/jobs.md).
import { errorMessage } from "@ephemera/kit";
import { agentConfig, isConfigError, type AgentConfig } from "./config.js";
import { runInit } from "./init.js";
import { LAYOUT_VERSION } from "./layout.js";
import { runSidecar } from "./sidecar.js";
import { JobAgent } from "../job/agent.js";
import { jobAgentConfig, type JobAgentConfig } from "../job/config.js";

const USAGE = `usage: ephemera-agent init [--check] | sidecar [--check] | job-agent [--check] | version
  init       fetch the step's inputs and script, write them and the entrypoint into EPHEMERA_AGENT_DIR
  sidecar    wait for the script's exit code, store its outputs, write the report
  job-agent  take the jobs of a runner group and run them here, one at a time (docs/jobs.md)
  --check    read the configuration and stop, calling nothing
environment: EPHEMERA_RUN_ID, EPHEMERA_TOKEN or EPHEMERA_TOKEN_FILE, EPHEMERA_IOCONTEXT (host:port),
  EPHEMERA_AGENT_DIR (default /ephemera), EPHEMERA_TLS, EPHEMERA_TLS_CA, EPHEMERA_TLS_SERVER_NAME,
  EPHEMERA_TLS_CLIENT_CERT, EPHEMERA_TLS_CLIENT_KEY
job-agent: EPHEMERA_POD_JOBS (host:port), EPHEMERA_JOB_GROUP, EPHEMERA_POD_NAME,
  EPHEMERA_POD_TOKEN or EPHEMERA_POD_TOKEN_FILE, EPHEMERA_JOB_KILL_GRACE_MS (default 5000), EPHEMERA_TLS…
`;

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [command, ...flags] = argv;
  if (command === "version") {
    process.stdout.write(`ephemera-agent layout ${LAYOUT_VERSION}\n`);
    return 0;
  }
  if ((command !== "init" && command !== "sidecar" && command !== "job-agent") || flags.some((f) => f !== "--check")) {
    process.stderr.write(USAGE);
    return 2;
  }
  if (command === "job-agent") return jobAgent(flags.includes("--check"), env);
  const say = (line: string) => process.stderr.write(`ephemera-${command}: ${line}\n`);
  let config: AgentConfig;
  try {
    config = agentConfig(env);
  } catch (err) {
    if (!isConfigError(err)) throw err;
    process.stderr.write(`${err.message}\n`);
    return 2;
  }
  if (flags.includes("--check")) {
    say(`configuration read: run ${config.runId}, IO context ${config.iocontext} (${config.tls ? "tls" : "plaintext"}), agent directory ${config.agentDir}`);
    return 0;
  }
  if (command === "init") {
    const result = await runInit(config, say);
    if (!result.ok) {
      say(`${result.report.message} (${result.report.reason}; report written)`);
      return 1;
    }
    say(`step prepared: ${result.inputs} input(s) present, ${result.files} file(s) written, ${result.outputs} output(s) declared`);
    return 0;
  }
  // Pod deletion stops every container at once: the sidecar stays to report the exit
  // code the entrypoint records for the stopped script (the step is then Cancelled).
  const stopping = new AbortController();
  process.on("SIGTERM", () => stopping.abort());
  const report = await runSidecar(config, say, { stopping: stopping.signal });
  say(report.outcome === "succeeded" ? "step succeeded; report written" : `step failed (${report.reason}): ${report.message}; report written`);
  return 0;
}

/** Takes and runs jobs until SIGTERM (the pod is deleted): the running job is stopped and reported first. */
async function jobAgent(check: boolean, env: NodeJS.ProcessEnv): Promise<number> {
  const say = (line: string) => process.stderr.write(`ephemera-job-agent: ${line}\n`);
  let config: JobAgentConfig;
  try {
    config = jobAgentConfig(env);
  } catch (err) {
    if (!isConfigError(err)) throw err;
    process.stderr.write(`${err.message}\n`);
    return 2;
  }
  say(`configuration read: group ${config.group}, pod ${config.pod}, jobs service ${config.jobs} (${config.tls ? "tls" : "plaintext"})`);
  if (check) return 0;
  const agent = new JobAgent(config, { env, say });
  process.on("SIGTERM", () => agent.stop());
  process.on("SIGINT", () => agent.stop());
  await agent.run();
  return 0;
}

// grpc-js names a TLS server by its IP when the IO context is an address, which Node flags (DEP0123).
process.noDeprecation = true;
main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`ephemera-agent: ${errorMessage(err)}\n`);
    process.exit(1);
  },
);

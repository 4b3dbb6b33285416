// `pnpm start`: every service of ephemera on this machine (process driver, cluster local),
// each restarted if it dies, until SIGINT or SIGTERM stops them all.
// JSON logs when piped, readable lines on a terminal (EPHEMERA_LOG_FORMAT=json|pretty).
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger } from "@ephemera/kit";
import { formatLine, startStack, StackInterruptedError } from "./index.js";

const logger = createLogger("stack");
// Health checks of servers on TLS at an IP address would print Node's DEP0123 notice.
process.noDeprecation = true;
const pretty = (process.env["EPHEMERA_LOG_FORMAT"] ?? (process.stdout.isTTY ? "pretty" : "json")) === "pretty";

async function main(): Promise<void> {
  // Signals are handled from the start: during start-up the abort alone stops the services
  // (startStack then rejects with StackInterruptedError).
  const interrupt = new AbortController();
  const starting = startStack({
    env: process.env,
    // services/stack/dist/main.js → services/<name>/dist/main.js
    entry: (service) => join(dirname(fileURLToPath(import.meta.url)), "..", "..", service, "dist", "main.js"),
    output: (service, line) => process.stdout.write(`${pretty ? formatLine(service, line) : line}\n`),
    signal: interrupt.signal,
  });
  const stop = (signal: NodeJS.Signals) => {
    if (interrupt.signal.aborted) return;
    logger.info({ signal }, "stopping the stack");
    interrupt.abort();
    void starting.then((stack) => stack.stop()).then(() => process.exit(0), () => undefined);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);

  const stack = await starting;
  const ca = process.env["EPHEMERA_TLS_CA"] ? ` EPHEMERA_TLS_CA=${process.env["EPHEMERA_TLS_CA"]}` : "";
  process.stderr.write(
    `ephemera is up: API ${stack.api}, IO context ${stack.iocontext}, prefix ${process.env["EPHEMERA_PREFIX"] ?? "eph"}. ` +
    `Try: EPHEMERA_API=${stack.api}${ca} pnpm -s eph plugin apply -f examples/hello-db/plugin.yaml\n` +
    `${stack.console ? `The console: ${stack.console}\n` : ""}${stack.access}\n`,
  );
}

main().catch((err: unknown) => {
  if (err instanceof StackInterruptedError) process.exit(0);
  logger.fatal({ err }, "the stack failed to start");
  process.exit(1);
});

// `pnpm start`: every service of ephemera on this machine (process driver, cluster local).
// JSON logs when piped, readable lines on a terminal (EPHEMERA_LOG_FORMAT=json|pretty).
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger } from "@ephemera/kit";
import { formatLine, startStack } from "./index.js";

const logger = createLogger("stack");
const pretty = (process.env["EPHEMERA_LOG_FORMAT"] ?? (process.stdout.isTTY ? "pretty" : "json")) === "pretty";

async function main(): Promise<void> {
  const stack = await startStack({
    env: process.env,
    // services/stack/dist/main.js → services/<name>/dist/main.js
    entry: (service) => join(dirname(fileURLToPath(import.meta.url)), "..", "..", service, "dist", "main.js"),
    output: (service, line) => process.stdout.write(`${pretty ? formatLine(service, line) : line}\n`),
  });
  process.stderr.write(
    `ephemera is up: API ${stack.api}, IO context ${stack.iocontext}, prefix ${process.env["EPHEMERA_PREFIX"] ?? "eph"}. ` +
    `Try: EPHEMERA_API=${stack.api} pnpm -s eph plugin apply -f examples/hello-db/plugin.yaml\n`,
  );
  let stopping = false;
  const stop = (code: number) => {
    if (stopping) return;
    stopping = true;
    void stack.stop().then(() => process.exit(code));
  };
  process.on("SIGTERM", () => stop(0));
  process.on("SIGINT", () => stop(0));
  const { service, code } = await stack.exited;
  logger.error({ service, code }, "a service exited; stopping the stack");
  stop(1);
}

main().catch((err: unknown) => {
  logger.fatal({ err }, "the stack failed to start");
  process.exit(1);
});

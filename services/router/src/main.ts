// ephemera-router: the routing sidecar of a baseline pod (docs/routing.md, "The routing
// sidecar"). Bundled into one file, /router/router.cjs in the image ephemera/router.
import { configured, createLogger, errorMessage, onShutdown } from "@ephemera/kit";
import { routerConfig } from "./config.js";
import { startRouter } from "./router.js";

async function main(): Promise<void> {
  const logger = createLogger("ephemera-router");
  const config = configured(logger, "ephemera-router", () => routerConfig(process.env));
  const router = await startRouter(config, logger);
  onShutdown(logger, [() => router.stop()]);
}

main().catch((err: unknown) => {
  process.stderr.write(`ephemera-router: ${errorMessage(err)}\n`);
  process.exit(1);
});

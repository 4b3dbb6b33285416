// ephemera-router: the routing sidecar of a baseline pod (docs/routing.md, "The routing
// sidecar"). Bundled into one file, /router/router.cjs in the image ephemera/router.
import { configured, createLogger, errorMessage, onShutdown } from "@ephemera/kit";
import { routerConfig } from "./config.js";
import { startRouter } from "./router.js";

/**
 * On SIGTERM the pod is going: its endpoints are being removed, and the app gets the same
 * signal. Requests under way get this long to finish through the router (the pod's grace
 * period is 30 s by default).
 */
const DRAIN_MS = 5_000;

async function main(): Promise<void> {
  const logger = createLogger("ephemera-router");
  const config = configured(logger, "ephemera-router", () => routerConfig(process.env));
  const router = await startRouter(config, logger);
  onShutdown(logger, [() => router.stop({ drainMs: DRAIN_MS })]);
}

main().catch((err: unknown) => {
  process.stderr.write(`ephemera-router: ${errorMessage(err)}\n`);
  process.exit(1);
});

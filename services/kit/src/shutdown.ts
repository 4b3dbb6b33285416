// Graceful shutdown: run the closers once on SIGTERM/SIGINT, in reverse order of registration.
import type { Logger } from "./logger.js";

export function onShutdown(logger: Logger, closers: Array<() => Promise<void> | void>): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    void (async () => {
      for (const close of [...closers].reverse()) {
        try { await close(); } catch (err) { logger.error({ err }, "error during shutdown"); }
      }
      logger.info("stopped");
      process.exit(0);
    })();
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

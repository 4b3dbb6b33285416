// JSON logs with pino; every line names its service.
import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

/** To stdout, or to `destination` (a test reading what was logged). */
export function createLogger(service: string, level = process.env["LOG_LEVEL"] ?? "info", destination?: DestinationStream): Logger {
  const options = { name: service, level, base: { service, pid: process.pid } };
  return destination ? pino(options, destination) : pino(options);
}

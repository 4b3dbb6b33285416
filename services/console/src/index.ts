// The web console: the HTTP facade over the public API and the single-page app's files.
export { startConsole, SECURITY_HEADERS, type ConsoleOptions, type RunningConsole } from "./server.js";
export { consoleConfig, DEFAULT_CONSOLE_LISTEN, type ConsoleConfig } from "./config.js";

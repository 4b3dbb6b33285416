// Where io-agent's built step program is, for the process driver. Kept apart: it needs
// import.meta, which the CommonJS test build of the other modules cannot hold.
import { createRequire } from "node:module";

export const stepProgramPath = (): string => createRequire(import.meta.url).resolve("@ephemera/io-agent/step");

// Where the built ephemera-launch is (services/runner/dist, next to this module), for the
// process driver. Kept apart: it needs import.meta, which the CommonJS test build of the
// other modules cannot hold.
import { fileURLToPath } from "node:url";

export const launcherPath = (): string => fileURLToPath(new URL("./ephemera-launch", import.meta.url));

// Where the built single-page app is: this package's dist/web (the bundle's output). Kept
// apart: it needs import.meta, which the CommonJS test build cannot load (tests name a root).
import { fileURLToPath } from "node:url";

export const defaultWebRoot = (): string => fileURLToPath(new URL("./web", import.meta.url));

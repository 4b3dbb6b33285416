// Where the built single-page app is: this package's dist/web (the bundle's output), whether
// this module runs built (dist/) or from its source under test (src/). Kept apart: it needs
// import.meta, which not every test build can load (tests may name a root instead).
import { fileURLToPath } from "node:url";

export const defaultWebRoot = (): string => fileURLToPath(new URL("../dist/web", import.meta.url));

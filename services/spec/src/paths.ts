// Input and output paths: files in the `main` container that the agents write and read.
import { posix } from "node:path";

/** Why a path cannot be used, or undefined when it can. */
export function checkPath(p: string): string | undefined {
  if (!p.startsWith("/")) return "must be absolute (start with '/')";
  if (p.includes("\0")) return "must not contain a NUL character";
  if (p.split("/").includes("..")) return "must not contain '..'";
  if (p === "/" || posix.normalize(p) === "/") return "must name a file, not '/'";
  if (posix.normalize(p) !== p || p.endsWith("/")) return `must be normalised (write "${posix.normalize(p).replace(/\/$/, "")}")`;
  return undefined;
}

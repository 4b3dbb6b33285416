// Input and output paths: files in the `main` container that the agents write and read.
import { posix } from "node:path";

/** Why a path cannot be used, or undefined when it can. */
export function checkPath(p: string): string | undefined {
  if (!p.startsWith("/")) return "must be absolute (start with '/')";
  if (p.includes("\0")) return "must not contain a NUL character";
  if (p.split("/").includes("..")) return "must not contain '..'";
  if (p === "/" || posix.normalize(p) === "/") return "must name a file, not '/'";
  if (posix.normalize(p) !== p || p.endsWith("/")) return `must be normalised (write "${posix.normalize(p).replace(/\/$/, "")}")`;
  // A step gets a private view of each directory its paths are in: never of / itself.
  if (posix.dirname(p) === "/") return `must be in a directory, not directly under '/' (a step gets a private view of its paths' directories; write e.g. "/outputs${p}")`;
  return undefined;
}

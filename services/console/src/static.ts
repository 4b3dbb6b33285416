// The single-page app's files: hashed assets cached for a year and served pre-compressed
// (br, then gzip) as the browser accepts, and index.html for every other page (the app's
// routes), never cached so a new build is picked up at once. Nothing outside the root is read.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, resolve, sep } from "node:path";

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

export const IMMUTABLE = "public, max-age=31536000, immutable";

/** Pure: the encodings to try, best first, for an Accept-Encoding header (q=0 refuses one). */
export function acceptedEncodings(header: string | undefined): Array<"br" | "gzip"> {
  const offered = new Map<string, number>();
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    if (!name) continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    offered.set(name, q ? Number(q.slice(2)) : 1);
  }
  const ok = (name: string) => (offered.get(name) ?? offered.get("*") ?? 0) > 0;
  return (["br", "gzip"] as const).filter(ok);
}

/** Pure: the file under `root` a URL path names, or undefined when it would leave the root or is no plain name. */
export function fileUnder(root: string, urlPath: string): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (path.includes("\0") || path.includes("\\") || path.split("/").some((s) => s === ".." || s === ".")) return undefined;
  const base = resolve(root);
  const file = resolve(base, `.${path}`);
  return file.startsWith(base + sep) ? file : undefined;
}

async function isFile(path: string): Promise<number | undefined> {
  try {
    const s = await stat(path);
    return s.isFile() ? s.size : undefined;
  } catch {
    return undefined;
  }
}

export interface StaticFiles {
  /** Answers a GET or HEAD that is not for /api; headers: the security headers every answer carries. */
  serve(req: IncomingMessage, res: ServerResponse, pathname: string, headers: Record<string, string>): Promise<void>;
}

export function staticFiles(webRoot: string): StaticFiles {
  const send = async (req: IncomingMessage, res: ServerResponse, file: string, cache: string, headers: Record<string, string>): Promise<boolean> => {
    const type = TYPES[extname(file)] ?? "application/octet-stream";
    for (const encoding of acceptedEncodings(req.headers["accept-encoding"])) {
      const compressed = `${file}.${encoding === "br" ? "br" : "gz"}`;
      const size = await isFile(compressed);
      if (size === undefined) continue;
      res.writeHead(200, { ...headers, "Content-Type": type, "Content-Encoding": encoding, "Content-Length": String(size), "Cache-Control": cache, Vary: "Accept-Encoding" });
      return pipe(req, res, compressed);
    }
    const size = await isFile(file);
    if (size === undefined) return false;
    res.writeHead(200, { ...headers, "Content-Type": type, "Content-Length": String(size), "Cache-Control": cache, Vary: "Accept-Encoding" });
    return pipe(req, res, file);
  };
  const pipe = (req: IncomingMessage, res: ServerResponse, file: string): boolean => {
    if (req.method === "HEAD") res.end();
    else createReadStream(file).on("error", () => res.destroy()).pipe(res);
    return true;
  };
  const notFound = (res: ServerResponse, headers: Record<string, string>, line: string) => {
    res.writeHead(404, { ...headers, "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-cache" });
    res.end(`${line}\n`);
  };
  return {
    async serve(req, res, pathname, headers) {
      if (pathname.startsWith("/assets/")) {
        const file = fileUnder(join(webRoot, "assets"), pathname.slice("/assets".length));
        if (!file || !(await send(req, res, file, IMMUTABLE, headers))) notFound(res, headers, `no asset ${pathname}`);
        return;
      }
      if (!(await send(req, res, join(webRoot, "index.html"), "no-cache", headers))) {
        notFound(res, headers, `the console's page is not built: no ${join(webRoot, "index.html")} (pnpm build)`);
      }
    },
  };
}

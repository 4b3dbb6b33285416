// The console's built single-page app (pnpm bundle:console, part of pnpm build): what index.html
// loads first stays small, and the assets' names change with their content, which is what lets
// the server tell browsers to keep them for a year.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { brotliDecompressSync, gunzipSync } from "node:zlib";

const web = join(__dirname, "../../services/console/dist/web");
const LIMIT = 300 * 1024;

function indexHtml(): string {
  const file = join(web, "index.html");
  if (!existsSync(file)) throw new Error(`${file} is missing: run pnpm bundle:console (or pnpm build) first`);
  return readFileSync(file, "utf8");
}

function scriptsOf(html: string): string[] {
  return [...html.matchAll(/<script\b[^>]*\bsrc="([^"]+)"/g)].map((m) => m[1] ?? "");
}

function assetFile(url: string): string {
  expect(url).toMatch(/^\/assets\//);
  return join(web, url.slice(1));
}

describe("the console's bundle", () => {
  it("loads its first page's script in under 300 KB compressed, brotli and gzip alike", () => {
    const scripts = scriptsOf(indexHtml());
    expect(scripts.length).toBeGreaterThan(0);
    let brotli = 0;
    let gzip = 0;
    for (const url of scripts) {
      const file = assetFile(url);
      brotli += readFileSync(`${file}.br`).length;
      gzip += readFileSync(`${file}.gz`).length;
    }
    expect(brotli).toBeLessThan(LIMIT);
    expect(gzip).toBeLessThan(LIMIT);
  });

  it("names every asset after a hash of its content, and its .gz and .br hold the same bytes", () => {
    const html = indexHtml();
    const referenced = [...scriptsOf(html), ...[...html.matchAll(/<link\b[^>]*\bhref="([^"]+)"/g)].map((m) => m[1] ?? "")];
    expect(referenced.some((u) => u.endsWith(".css"))).toBe(true);
    for (const url of referenced) expect(url).toMatch(/^\/assets\/app-[A-Z0-9]{8,}\.(js|css)$/);
    const assets = readdirSync(join(web, "assets")).filter((n) => !/\.(gz|br)$/.test(n));
    for (const name of assets) {
      expect(name).toMatch(/^[a-z]+-[A-Z0-9]{8,}\.[a-z]+$/);
      const raw = readFileSync(join(web, "assets", name));
      expect(gunzipSync(readFileSync(join(web, "assets", `${name}.gz`))).equals(raw)).toBe(true);
      expect(brotliDecompressSync(readFileSync(join(web, "assets", `${name}.br`))).equals(raw)).toBe(true);
    }
  });

  it("has no inline script, which the server's Content-Security-Policy would block", () => {
    expect(indexHtml()).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  });
});

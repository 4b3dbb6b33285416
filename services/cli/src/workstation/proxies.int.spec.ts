// The HTTP and SOCKS5 proxies, used by curl as a user would, against a dial that connects
// cluster names to real TCP servers on this machine (the tunnel's dial stands behind it).
import { execFile } from "node:child_process";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { promisify } from "node:util";
import { createHttpProxy } from "./http-proxy.js";
import { createSocksProxy, type SocksServer } from "./socks-proxy.js";
import type { Dial } from "./tunnel.js";

const run = promisify(execFile);
const curl = (...args: string[]) => run("curl", ["-sS", "--max-time", "10", ...args]).then((r) => r.stdout);

let backend: HttpServer;
let http: HttpServer;
let socks: SocksServer;
const dialled: string[] = [];
const port = (s: { address(): AddressInfo | string | null }) => (s.address() as AddressInfo).port;

/** The cluster as the tunnel would reach it: two Services, each a real local server. */
const dial: Dial = (host, p) => {
  dialled.push(`${host}:${p}`);
  const to = host === "backend.demo-routing.svc" && p === 8080 ? port(backend) : undefined;
  if (to === undefined) return Promise.reject(new Error(`no Service ${host}:${p} in the cluster`));
  return new Promise((resolve, reject) => {
    const s = connect(to, "127.0.0.1", () => resolve(s)).once("error", reject);
  });
};

const listening = <T extends { listen(port: number, host: string, cb: () => void): unknown }>(s: T) =>
  new Promise<T>((resolve) => void s.listen(0, "127.0.0.1", () => resolve(s)));

beforeAll(async () => {
  backend = await listening(createHttpServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => res.end(`backend saw ${req.method} ${req.url} host=${req.headers.host} proxy-connection=${req.headers["proxy-connection"] ?? "-"} body=${body}`));
  }));
  http = await listening(createHttpProxy(dial));
  socks = createSocksProxy(dial);
  await new Promise<void>((resolve) => socks.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  for (const s of [backend, http]) s.closeAllConnections?.();
  await Promise.all([backend, http, socks].map((s) => new Promise((resolve) => s.close(() => resolve(undefined)))));
});
beforeEach(() => void dialled.splice(0));

describe("the HTTP proxy", () => {
  it("forwards an absolute-form request to the Service by its cluster name, without the proxy's own headers", async () => {
    const out = await curl("-x", `http://127.0.0.1:${port(http)}`, "-H", "Proxy-Connection: keep-alive", "--data", "hi", "http://backend.demo-routing.svc:8080/x?y=1");
    expect(out).toBe("backend saw POST /x?y=1 host=backend.demo-routing.svc:8080 proxy-connection=- body=hi");
    expect(dialled).toEqual(["backend.demo-routing.svc:8080"]);
  });

  it("tunnels CONNECT: the bytes go both ways through the dialled stream", async () => {
    const out = await curl("-p", "-x", `http://127.0.0.1:${port(http)}`, "http://backend.demo-routing.svc:8080/through-connect");
    expect(out).toBe("backend saw GET /through-connect host=backend.demo-routing.svc:8080 proxy-connection=- body=");
  });

  it("answers 502 with the dial's reason when the cluster has no such Service", async () => {
    const out = await curl("-x", `http://127.0.0.1:${port(http)}`, "-w", " %{http_code}", "http://nothing.here.svc:80/");
    expect(out).toBe("no Service nothing.here.svc:80 in the cluster\n 502");
    await expect(curl("-p", "-x", `http://127.0.0.1:${port(http)}`, "http://nothing.here.svc:80/")).rejects.toThrow(/502/);
  });

  it("refuses a request that is not absolute-form with 400", async () => {
    const out = await curl("-w", " %{http_code}", `http://127.0.0.1:${port(http)}/relative`);
    expect(out).toBe('the proxy takes absolute-form http:// requests and CONNECT, got "/relative"\n 400');
  });
});

describe("the SOCKS5 proxy", () => {
  it("connects to a domain name the client does not resolve (socks5h)", async () => {
    const out = await curl("--socks5-hostname", `127.0.0.1:${port(socks)}`, "http://backend.demo-routing.svc:8080/via-socks");
    expect(out).toBe("backend saw GET /via-socks host=backend.demo-routing.svc:8080 proxy-connection=- body=");
    expect(dialled).toEqual(["backend.demo-routing.svc:8080"]);
  });

  it("refuses a target the dial cannot reach, and curl says so", async () => {
    await expect(curl("--socks5-hostname", `127.0.0.1:${port(socks)}`, "http://nothing.here.svc:80/")).rejects.toThrow(/SOCKS5|connection/i);
    expect(dialled).toEqual(["nothing.here.svc:80"]);
  });
});

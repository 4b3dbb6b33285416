// The console in front of an API that asks no token: fine on loopback, refused beyond it
// unless EPHEMERA_API_ALLOW_OPEN (the rule of the API, the gateway and the tunnel); and the
// console served over TLS with the API's certificate, its cookie then Secure.
import { rmSync } from "node:fs";
import { request } from "node:https";
import { dirname } from "node:path";
import { makeCerts } from "../../../test/support/certs.js";
import { startCore, type Core } from "../../../test/support/core.js";
import { capturedLogger, http, webFixture } from "./console.testkit.js";
import { startConsole } from "./server.js";

const web = webFixture();
const certs = makeCerts();
let core: Core;

beforeAll(async () => {
  core = await startCore({ api: { tls: certs.server() } });
});
afterAll(async () => {
  await core?.stop();
  certs.remove();
  rmSync(dirname(web.root), { recursive: true, force: true });
});

describe("a console in front of an open API", () => {
  it("refuses to listen beyond loopback, with the API's wording", async () => {
    const { logger } = capturedLogger("console");
    await expect(startConsole({ listen: "0.0.0.0:0", api: core.address, apiTls: certs.client(), webRoot: web.root, logger })).rejects.toThrow(
      "the console on 0.0.0.0:0 is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, so anyone who reaches it may read every sandbox, " +
      "and delete and retry them, from other machines too. Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true",
    );
  });

  it("listens beyond loopback when allowed, saying so, and on loopback; whoami says the API is open", async () => {
    const allowed = capturedLogger("console");
    const elsewhere = await startConsole({ listen: "0.0.0.0:0", api: core.address, apiTls: certs.client(), webRoot: web.root, logger: allowed.logger, allowOpen: true });
    try {
      expect(allowed.text()).toContain("from other machines too (EPHEMERA_API_ALLOW_OPEN)");
      expect(await http(elsewhere.address, "GET", "/api/whoami")).toMatchObject({ status: 200, json: { role: "admin", open: true } });
    } finally {
      await elsewhere.close();
    }
    const local = await startConsole({ listen: "127.0.0.1:0", api: core.address, apiTls: certs.client(), webRoot: web.root, logger: capturedLogger("console").logger });
    try {
      const login = await http(local.address, "POST", "/api/login", { body: { token: "" } });
      expect(login).toMatchObject({ status: 200, json: { role: "admin", open: true } });
    } finally {
      await local.close();
    }
  });

  it("serves HTTPS with the API's certificate, its session cookie Secure", async () => {
    const running = await startConsole({
      listen: "127.0.0.1:0", api: core.address, apiTls: certs.client(), tls: certs.server(), webRoot: web.root, logger: capturedLogger("console").logger,
    });
    try {
      expect(running.address).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const answer = await new Promise<{ status: number; cookie: string[] | undefined; body: string }>((resolve, reject) => {
        const url = new URL(running.address);
        const req = request({ host: url.hostname, port: url.port, path: "/api/login", method: "POST", ca: certs.client().ca, headers: { "Content-Type": "application/json" } }, (res) => {
          let body = "";
          res.on("data", (d: Buffer) => { body += d.toString(); });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, cookie: res.headers["set-cookie"], body }));
        });
        req.on("error", reject);
        req.end(JSON.stringify({ token: "some-token" }));
      });
      expect(answer.status).toBe(200);
      expect(answer.cookie).toEqual(["ephemera_console=some-token; HttpOnly; SameSite=Strict; Path=/; Secure"]);
    } finally {
      await running.close();
    }
  });
});

describe("a console whose API cannot be reached", () => {
  it("answers 502 naming the API's address in one line, and stays up", async () => {
    const { createServer } = await import("node:net");
    // A port nothing listens on: taken, then released.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const api = `127.0.0.1:${port}`;
    const running = await startConsole({ listen: "127.0.0.1:0", api, webRoot: web.root, logger: capturedLogger("console").logger, apiTimeoutMs: 2_000 });
    try {
      const answer = await http(running.address, "GET", "/api/whoami");
      expect(answer).toMatchObject({ status: 502, json: { code: "UNAVAILABLE" } });
      const error = (answer.json as { error: string }).error;
      expect(error).toMatch(new RegExp(`^the API at ${api} cannot be reached now: `));
      expect(error).not.toMatch(/Resolution note|\n/);
      expect((await http(running.address, "GET", "/healthz")).status).toBe(200);
    } finally {
      await running.close();
    }
  });
});

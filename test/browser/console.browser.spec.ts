// The web console in a real browser (Debian's chromium, driven by playwright-core) against
// the real core behind bearer tokens: sign in, watch hello-db come up with every step of its
// graph turning green without a reload, read a step's log, see why a sandbox failed, and a
// viewer who can change nothing — the facade refuses, not only the buttons. The pages'
// screenshots are written to docs/images/ (README shows the sandbox page).
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { parse, stringify } from "yaml";
import { call, createLogger, grpc } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { startConsole, type RunningConsole } from "../../services/console/src/server.js";
import { TOKENS, tokensAccess } from "../support/api-tokens.js";
import { describeWithBrowser, launchBrowser } from "../support/browser.js";
import { startCore, type Core } from "../support/core.js";
import { ephAt, ephOk, type Eph } from "../support/eph.js";

const ROOT = join(__dirname, "..", "..");
const SHOTS = join(ROOT, "docs", "images");
const STEPS = ["provision", "seed-schema", "seed-data", "verify"];

describeWithBrowser("the web console in a browser", () => {
  let core: Core;
  let console_: RunningConsole;
  let browser: Browser;
  let eph: Eph;
  let work: string;
  let gate: string;
  const url = (path: string) => `${console_.address}${path}`;
  const as = (role: keyof typeof TOKENS) => (args: string[]) => ephOk(eph, ["--token", TOKENS[role], ...args], { timeoutMs: 30_000 });

  beforeAll(async () => {
    core = await startCore({ api: { access: tokensAccess() } });
    console_ = await startConsole({ listen: "127.0.0.1:0", api: core.address, logger: createLogger("console", "silent") });
    eph = ephAt(core.address);
    work = mkdtempSync(join(tmpdir(), "eph-console-"));
    // hello-db as the example ships it, but its first step waits at a gate the test opens
    // once the page shows it running: the graph must then turn green live, or the test fails.
    gate = join(core.scratch, "gate");
    cpSync(join(ROOT, "examples", "hello-db"), join(work, "hello-db"), { recursive: true });
    const plugin = parse(readFileSync(join(work, "hello-db", "plugin.yaml"), "utf8")) as { spec: { create: Array<{ name: string; script: string }> } };
    const provision = plugin.spec.create.find((s) => s.name === "provision")!;
    provision.script = provision.script.replace("set -euo pipefail\n",
      `set -euo pipefail\necho "waiting for the gate"\nwhile [ ! -e ${gate} ]; do sleep 0.05; done\n`);
    writeFileSync(join(work, "hello-db", "plugin.yaml"), stringify(plugin));
    writeFileSync(join(work, "broken-db.yaml"), stringify({
      name: "broken-db@1.0.0",
      spec: { runner: { image: "debian:bookworm-slim" }, create: [{ name: "connect", script: "#!/bin/sh\necho 'cannot reach db.internal:5432' >&2\nexit 3\n" }] },
    }));
    await as("editor")(["plugin", "apply", "-f", join(work, "hello-db", "plugin.yaml")]);
    await as("editor")(["plugin", "apply", "-f", join(work, "broken-db.yaml")]);
    browser = await launchBrowser();
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await console_?.close();
    await core?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** Uncaught errors of the pages a test opened: none is expected. */
  const pageErrors: string[] = [];
  afterEach(() => expect(pageErrors.splice(0)).toEqual([]));
  const signIn = async (role: keyof typeof TOKENS, context: BrowserContext): Promise<Page> => {
    const page = await context.newPage();
    page.on("pageerror", (e) => pageErrors.push(`${page.url()}: ${e.message}`));
    await page.goto(url("/sandboxes"));
    await page.locator("input[name=token]").waitFor();
    expect(new URL(page.url()).pathname).toBe("/login");
    await page.fill("input[name=token]", TOKENS[role]);
    await page.click("button[type=submit]");
    await page.getByTestId("whoami").filter({ hasText: `test-${role} (${role})` }).waitFor();
    return page;
  };
  const sandboxFile = (name: string, plugin: string, labels: Record<string, string> = {}) => {
    const file = join(work, `${name}.yaml`);
    writeFileSync(file, stringify({
      name, spec: { cluster: "local", labels, description: `${plugin} for the console`, ttl: { duration: "2h" },
        resources: [{ name: "db", plugin, params: { dbname: "orders", rows: "42" } }] },
    }));
    return file;
  };

  it("signs an editor in, shows a new sandbox in the list live, and draws hello-db's steps turning green as they run", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn("editor", context);
    await as("editor")(["sandbox", "apply", "--wait=false", "-f", sandboxFile("feature-orders", "hello-db", { team: "orders", feature: "x-checkout" })]);
    const row = page.getByTestId("sandbox-row-feature-orders");
    await row.waitFor(); // arrived by the live stream: the page was not reloaded
    await row.getByRole("link", { name: "feature-orders" }).click();
    await page.waitForURL(/\/sandboxes\/feature-orders$/);

    const node = (step: string) => page.getByTestId(`step-create-${step}`);
    await page.locator('[data-testid="step-create-provision"][data-status="Running"]').waitFor({ timeout: 30_000 });
    for (const step of STEPS.slice(1)) expect(await node(step).getAttribute("data-status")).not.toBe("Succeeded");
    await page.evaluate(() => { (globalThis as unknown as { unreloaded: boolean }).unreloaded = true; });

    writeFileSync(gate, "");
    for (const step of STEPS) await page.locator(`[data-testid="step-create-${step}"][data-status="Succeeded"]`).waitFor({ timeout: 30_000 });
    expect(await page.evaluate(() => (globalThis as unknown as { unreloaded?: boolean }).unreloaded)).toBe(true);
    await page.screenshot({ path: join(SHOTS, "console-sandbox.png") });
    await context.close();
  }, 120_000);

  it("opens a step's log from its node on the graph", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn("editor", context);
    await page.goto(url("/sandboxes/feature-orders"));
    await page.getByTestId("step-create-provision").getByRole("link").first().click();
    await page.waitForURL(/\/sandboxes\/feature-orders\/resources\/db\/create\/provision/);
    await page.getByTestId("step-log").filter({ hasText: "provisioning database orders" }).waitFor();
    expect(await page.getByTestId("step-log").textContent()).toContain("waiting for the gate");
    await page.screenshot({ path: join(SHOTS, "console-step-log.png") });
    await context.close();
  }, 60_000);

  it("says in words why a sandbox failed", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn("editor", context);
    await as("editor")(["sandbox", "apply", "--wait=false", "-f", sandboxFile("feature-broken", "broken-db", { team: "payments" })]);
    await page.goto(url("/sandboxes/feature-broken"));
    const reason = page.getByTestId("failure-reason");
    await reason.filter({ hasText: "ResourceFailed" }).waitFor({ timeout: 30_000 });
    await page.locator('[data-testid="step-create-connect"][data-status="Failed"]').waitFor();
    expect(await reason.textContent()).toContain("connect");
    await page.getByTestId("retry-sandbox").waitFor();
    await page.screenshot({ path: join(SHOTS, "console-failed.png") });
    await context.close();
  }, 60_000);

  it("gives a viewer no way to change anything: no buttons, and the facade refuses the calls themselves", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn("viewer", context);
    await page.goto(url("/sandboxes/feature-orders"));
    await page.locator('[data-testid="step-create-verify"][data-status="Succeeded"]').waitFor();
    expect(await page.getByTestId("delete-sandbox").count()).toBe(0);
    expect(await page.getByTestId("retry-sandbox").count()).toBe(0);
    const before = (await core.events()).length;
    const refused = await page.evaluate(async () => Promise.all([
      fetch("/api/sandboxes/feature-orders", { method: "DELETE", headers: { "X-Ephemera-Console": "1" } }),
      fetch("/api/sandboxes/feature-broken/retry", { method: "POST", headers: { "X-Ephemera-Console": "1" } }),
      fetch("/api/sandboxes/feature-orders/outputs"),
    ].map((p) => p.then(async (r) => [r.status, (await r.json() as { error: string }).error]))));
    expect(refused.map(([status]) => status)).toEqual([403, 403, 403]);
    expect(String(refused[0]![1])).toContain("role viewer may not call SandboxService/Delete");
    expect((await core.events()).length).toBe(before);
    expect(core.sandboxes.list().map((s) => s.name)).toEqual(expect.arrayContaining(["feature-orders", "feature-broken"]));
    await context.close();
  }, 60_000);

  it("lets an editor delete a sandbox from its page, and the list drops it live", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn("editor", context);
    await page.goto(url("/sandboxes/feature-broken"));
    await page.getByTestId("delete-sandbox").click();
    await page.getByTestId("confirm-dialog-confirm").click();
    await core.waitForEvent("ephemera.sandbox.deleted.v1", "feature-broken", 30_000);
    await page.goto(url("/sandboxes"));
    await page.getByTestId("sandbox-row-feature-orders").waitFor();
    expect(await page.getByTestId("sandbox-row-feature-broken").count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, "console-sandboxes.png") });
    await context.close();
  }, 60_000);

  it("is readable on a phone-width screen in the dark theme, and shows plugins with their graphs and the events", async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: "dark" });
    const page = await signIn("editor", context);
    await page.goto(url("/sandboxes/feature-orders"));
    await page.locator('[data-testid="step-create-verify"][data-status="Succeeded"]').waitFor();
    const width = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(390);
    await page.screenshot({ path: join(SHOTS, "console-phone-dark.png"), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(url("/plugins/hello-db/1.0.0"));
    await page.getByTestId("step-create-verify").waitFor();
    await page.screenshot({ path: join(SHOTS, "console-plugin.png") });
    await page.goto(url("/events?sandbox=feature-orders"));
    await page.locator("td code", { hasText: "sandbox.created.v1" }).first().waitFor();
    expect(await page.locator("td code", { hasText: "sandbox.updated.v1" }).count()).toBe(0);
    // Live: a change made elsewhere appears without a reload.
    await as("editor")(["sandbox", "apply", "--wait=false", "-f", sandboxFile("feature-orders", "hello-db", { team: "orders", feature: "x-checkout", reviewed: "yes" })]);
    await page.locator("td code", { hasText: "sandbox.updated.v1" }).first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: join(SHOTS, "console-events.png") });
    await context.close();
  }, 60_000);

  it("is reached from the keyboard: the skip link first, then a sandbox opened with Enter", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn("editor", context);
    await page.goto(url("/sandboxes"));
    await page.getByTestId("sandbox-row-feature-orders").waitFor();
    const focused = () => page.evaluate(() => {
      const el = (globalThis as unknown as { document: { activeElement: { textContent: string | null; tagName: string } | null } }).document.activeElement;
      return `${el?.tagName ?? ""} ${el?.textContent?.trim() ?? ""}`;
    });
    await page.keyboard.press("Tab");
    expect(await focused()).toBe("A Skip to content");
    let reached = false;
    for (let i = 0; i < 60 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = (await focused()) === "A feature-orders";
    }
    expect(reached).toBe(true);
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/sandboxes\/feature-orders$/);
    await context.close();
  }, 60_000);

  it("stays usable at 1,000 sandboxes: the facade filters them and the page draws only the rows in view", async () => {
    const client = new pb.SandboxServiceClient(core.address, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${TOKENS.editor}`);
    const name = (i: number) => `load-${String(i).padStart(4, "0")}`;
    try {
      for (let batch = 0; batch < 1000; batch += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => batch + j).map((i) => call(client.apply.bind(client), {
          sandbox: pb.Sandbox.fromJSON({ name: name(i), spec: { cluster: "local", labels: { batch: "load", shard: String(i % 10) } } }), dryRun: false,
        }, 15_000, md)));
      }
    } finally {
      client.close();
    }
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn("viewer", context);
    await page.goto(url("/sandboxes?label=batch%3Dload"));
    await page.getByText("1000 shown").waitFor({ timeout: 30_000 });
    const rows = await page.locator('[data-testid^="sandbox-row-"]').count();
    expect(rows).toBeGreaterThan(5);
    expect(rows).toBeLessThan(100);
    // The facade answers a filtered list, not the page.
    const filtered = await page.evaluate(async () => (await (await fetch("/api/sandboxes?label=shard%3D3&label=batch%3Dload")).json()) as { sandboxes: Array<{ name: string }> });
    expect(filtered.sandboxes).toHaveLength(100);
    expect(filtered.sandboxes.every((r) => Number(r.name.slice(5)) % 10 === 3)).toBe(true);
    await page.goto(url("/sandboxes?label=batch%3Dload&label=shard%3D3"));
    await page.getByText("100 shown").waitFor();
    // Scrolled to its end, the list draws its last rows.
    await page.goto(url("/sandboxes?label=batch%3Dload"));
    await page.getByTestId(`sandbox-row-${name(0)}`).hover();
    const last = page.getByTestId(`sandbox-row-${name(999)}`);
    for (let i = 0; i < 200 && !(await last.isVisible()); i++) await page.mouse.wheel(0, 2_000);
    expect(await last.isVisible()).toBe(true);
    expect(await page.locator('[data-testid^="sandbox-row-"]').count()).toBeLessThan(100);
    await context.close();
  }, 180_000);
});

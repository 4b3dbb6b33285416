// ephemera-router stopping as a pod goes (SIGTERM): no new connection, idle HTTP/1.1
// connections closed, a request under way answered in full, and what is still open after
// the drain's time cut.
import { Agent, request, type IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { waitFor } from "@ephemera/kit";
import { startHarness, type Harness } from "./harness.testkit.js";

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
  await waitFor(() => h.router.table.ready, { what: "the first rules snapshot" });
});
afterEach(() => h?.stop());

const get = (port: number, path: string, agent: Agent) => new Promise<IncomingMessage>((resolve, reject) => {
  request({ host: "127.0.0.1", port, path, agent }, resolve).on("error", reject).end();
});
const body = (res: IncomingMessage) => new Promise<string>((resolve, reject) => {
  let text = "";
  res.on("data", (c: Buffer) => (text += c.toString()));
  res.on("end", () => resolve(text));
  res.on("error", reject);
});

describe("ephemera-router stopping with a drain", () => {
  it("takes no new connection, closes idle ones, and answers the request under way in full before it stops", async () => {
    const port = h.listenerOf(h.baseline.httpPort);
    const idleAgent = new Agent({ keepAlive: true });
    const busyAgent = new Agent({ keepAlive: true });
    try {
      await body(await get(port, "/", idleAgent));
      const idle = Object.values(idleAgent.freeSockets).flat()[0] as Socket;
      let idleClosed = false;
      idle.once("close", () => (idleClosed = true));
      // Its headers are here; its body comes in 600 ms.
      const slow = await get(port, "/slow/600", busyAgent);
      const order: string[] = [];
      const answered = body(slow).then((text) => {
        order.push("answered");
        return text;
      });
      const stopped = h.router.stop({ drainMs: 30_000 }).then(() => order.push("stopped"));

      const refused = await new Promise<string>((resolve) => {
        const s = connect({ port, host: "127.0.0.1" });
        s.on("connect", () => resolve("connected"));
        s.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      });
      expect(refused).toBe("ECONNREFUSED");
      await waitFor(() => idleClosed, { what: "the idle connection closed by the router" });
      expect(JSON.parse(await answered)).toMatchObject({ app: "baseline", url: "/slow/600" });
      await stopped;
      expect(order).toEqual(["answered", "stopped"]);
    } finally {
      idleAgent.destroy();
      busyAgent.destroy();
    }
  });

  it("cuts a connection still open when the drain's time is up", async () => {
    const socket = connect({ port: h.listenerOf(h.baseline.tcpPort), host: "127.0.0.1" });
    let got = "";
    socket.on("data", (c: Buffer) => (got += c.toString()));
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.on("error", () => undefined);
    socket.write(Buffer.from([0x00, 0x2a]));
    await waitFor(() => got === "baseline:\x00*", { what: "the echo through the router" });
    await h.router.stop({ drainMs: 200 });
    await closed;
    expect(socket.destroyed).toBe(true);
  });
});

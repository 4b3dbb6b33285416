// ephemera-router on connections that are not HTTP: they reach the local app as they are,
// whatever rule the Routes API has (TCP carries no routing key), with each side's end
// passed on; a server-first protocol gets its greeting once the sniff timeout passed.
import { connect } from "node:net";
import { waitFor } from "@ephemera/kit";
import { startHarness, type Harness } from "./harness.testkit.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
  await waitFor(() => h.router.table.ready, { what: "the first rules snapshot" });
});
afterAll(() => h?.stop());

/** Sends `data`, ends the sending side, and collects all the app sends until it ends too. */
function exchange(port: number, data: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    const got: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => got.push(chunk));
    socket.on("end", () => {
      resolve(Buffer.concat(got));
      socket.end();
    });
    socket.on("error", reject);
    socket.end(data);
  });
}

describe("ephemera-router, plain TCP", () => {
  it.each([
    ["binary bytes", Buffer.from([0x00, 0x01, 0xff, 0x10, 0x0a])],
    ["a TLS ClientHello (not terminated: the app's own TLS)", Buffer.from([0x16, 0x03, 0x01, 0x00, 0x2e, 0x01, 0x00])],
    ["an inline command that starts like HTTP", Buffer.from("GET key\r\n")],
    ["the start of a request line, then the end", Buffer.from("GET /orders")],
  ])("passes %s to the local app, and its answer back, each side's end included", async (_, data) => {
    const answer = await exchange(h.listenerOf(h.baseline.tcpPort), data);
    expect(answer).toEqual(Buffer.concat([Buffer.from("baseline:"), data]));
  });

  it("carries a large stream both ways intact", async () => {
    const data = Buffer.alloc(4 << 20, 0x5a);
    data.write("\x00binary", 0, "latin1");
    const answer = await exchange(h.listenerOf(h.baseline.tcpPort), data);
    expect(answer.length).toBe(data.length + "baseline:".length);
    expect(answer.subarray("baseline:".length).equals(data)).toBe(true);
  });

  it("lets a server-first protocol greet once the client stayed silent for the sniff timeout", async () => {
    const socket = connect({ port: h.listenerOf(h.baseline.greetingPort), host: "127.0.0.1" });
    const lines: string[] = [];
    socket.on("data", (chunk: Buffer) => lines.push(...chunk.toString().split("\r\n").filter(Boolean)));
    try {
      await waitFor(() => lines.includes("220 baseline ready"), { what: "the app's greeting", timeoutMs: 5_000 });
      socket.write("HELO router\r\n");
      await waitFor(() => lines.includes("250 baseline got HELO router"), { what: "the app's answer" });
    } finally {
      socket.destroy();
    }
  });

  it("closes the client's connection when the app's port is closed", async () => {
    await h.baseline.close();
    const closed = await new Promise<string>((resolve) => {
      const socket = connect({ port: h.listenerOf(h.baseline.tcpPort), host: "127.0.0.1" });
      socket.on("error", (err) => resolve(`error ${(err as NodeJS.ErrnoException).code}`));
      socket.on("close", () => resolve("closed"));
      socket.write(Buffer.from([0x00, 0x01]));
    });
    expect(["closed", "error ECONNRESET"]).toContain(closed);
  });
});

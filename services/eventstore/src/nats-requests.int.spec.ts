// The one change ephemera makes to nats.js (patches/@nats-io__nats-core@3.4.0.patch): a
// request that is answered no longer makes an error object it never throws (a stack captured
// for every KV write, stream read and append, about 0.5 ms of a step in the runner's CPU
// profile). Against the machine's nats-server: answers, timeouts and no responders as before.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats } from "./connection.js";
import { NATS_URL } from "../../../test/support/servers.js";

const load = createRequire(join(__dirname, "..", "package.json"));
/** nats-core's own errors module, the one its requests make their errors from. */
const errors = load(join(dirname(load.resolve("@nats-io/nats-core")), "errors.js")) as { RequestError: new (...a: unknown[]) => Error };

describe("NATS requests (nats-core as patched)", () => {
  let nc: NatsConnection;
  const Original = errors.RequestError;
  let made = 0;

  beforeAll(async () => {
    errors.RequestError = class Counted extends Original {
      constructor(...args: unknown[]) {
        super(...args);
        made++;
      }
    };
    nc = await connectNats(NATS_URL, "nats-requests");
  });
  afterAll(async () => {
    errors.RequestError = Original;
    await nc.close();
  });

  it("answered, makes no error object", async () => {
    const subject = `ephemera-test.requests.${process.pid}.${Date.now()}`;
    const sub = nc.subscribe(subject, { callback: (_err, m) => { m.respond(m.data); } });
    try {
      made = 0;
      for (let i = 0; i < 20; i++) expect((await nc.request(subject, `n${i}`, { timeout: 5000 })).string()).toBe(`n${i}`);
      expect(made).toBe(0);
    } finally {
      sub.unsubscribe();
    }
  });

  it("unanswered, still fails: no responders at once, a silent responder at its timeout", async () => {
    const subject = `ephemera-test.requests.${process.pid}.${Date.now()}`;
    await expect(nc.request(`${subject}.nobody`, "x", { timeout: 5000 })).rejects.toThrow(/no responders/i);
    const silent = nc.subscribe(`${subject}.silent`, { callback: () => undefined });
    try {
      await expect(nc.request(`${subject}.silent`, "x", { timeout: 200 })).rejects.toThrow(/timeout/i);
    } finally {
      silent.unsubscribe();
    }
  });
});

// delay(): cut short by its signal, at once when the signal has already aborted, and leaving
// no listener on the signal once it has waited (a loop's signal lives for many waits).
import { getEventListeners } from "node:events";
import { delay } from "./wait.js";

describe("delay", () => {
  it("resolves when its signal aborts, and at once when it had already", async () => {
    const stop = new AbortController();
    const waiting = delay(60_000, stop.signal);
    stop.abort();
    await waiting;
    await delay(60_000, stop.signal);
  });

  it("removes its abort listener once it has waited", async () => {
    const signal = new AbortController().signal;
    for (let i = 0; i < 20; i++) await delay(0, signal);
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
  });
});

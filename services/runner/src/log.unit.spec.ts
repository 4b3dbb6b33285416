import { StepLog, TAIL_BYTES } from "./log.js";

const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}\n`).join("");

describe("step log", () => {
  it("keeps the whole log and a tail of the last 40 lines", () => {
    const log = new StepLog();
    log.write(Buffer.from(lines(1, 60)));
    expect(log.contents().toString()).toBe(lines(1, 60));
    expect(log.tail()).toBe(lines(21, 60).slice(0, -1));
  });

  it("bounds the tail to 4 KiB without a partial first line", () => {
    const log = new StepLog();
    const long = `${"x".repeat(1000)}\n`;
    for (let i = 0; i < 10; i++) log.write(Buffer.from(long));
    const tail = log.tail();
    expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(TAIL_BYTES);
    expect(tail.split("\n").every((l) => l.length === 1000)).toBe(true);
  });

  it("caps what it stores, keeping the beginning and the end", () => {
    const log = new StepLog(10, 8);
    log.write(Buffer.from("0123456789abcdefghijklmnopqrstuvwxyz"));
    const text = log.contents().toString();
    expect(text.startsWith("0123456789")).toBe(true);
    expect(text).toContain("18 bytes of log left out");
    expect(text.endsWith("stuvwxyz")).toBe(true);
  });
});

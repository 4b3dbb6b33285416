import { parseDuration } from "./duration.js";

describe("parseDuration", () => {
  it.each([
    ["90s", 90_000],
    ["3m", 180_000],
    ["1h", 3_600_000],
    ["1m30s", 90_000],
    ["500ms", 500],
    ["1.5s", 1500],
  ])("reads %s", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(["", "3", "3x", "m", "-1s", "0s", "3m junk"])("rejects %j", (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

import fc from "fast-check";
import { DURATION_PATTERN, DurationError, checkDuration, durationLimitText, parseDuration, requireDuration } from "./duration.js";
import { envDuration } from "./config.js";

const DAY = 86_400_000;

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["90s", 90_000],
    ["3m", 180_000],
    ["1h", 3_600_000],
    ["2d", 2 * DAY],
    ["1w", 7 * DAY],
    ["1m30s", 90_000],
    ["1h30m", 5_400_000],
    ["1d12h", 36 * 3_600_000],
    ["1w2d3h4m5s6ms", 9 * DAY + 3 * 3_600_000 + 4 * 60_000 + 5000 + 6],
    ["1.5s", 1500],
    ["1.5d", 36 * 3_600_000],
    ["0.5h", 1_800_000],
    ["0s1m", 60_000],
    ["090s", 90_000],
    ["8760h", 365 * DAY],
    ["0.0001s", 1],
  ])("reads %s", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    "", "3", "3x", "m", "s1", "-1s", "+1s", "0s", "0m0s", "0.0d", "3m junk", " 3m", "3m ", "1 h", "1h 30m",
    "1.s", ".5s", "1..5s", "1e3s", "1H", "2 days", "1y", "1sm", "ms", "3mss", "1,5s", "Infinity s", "NaNs",
  ])("refuses %j", (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });

  it("reads amounts past what a number holds as Infinity, which every limit refuses", () => {
    expect(parseDuration(`${"9".repeat(400)}s`)).toBe(Infinity);
    expect(checkDuration(`${"9".repeat(400)}s`, { maxMs: 365 * DAY })).toEqual({ problem: "is longer than the 365-day limit" });
  });

  it("takes an amount too small for a number as not zero (at least 1 ms)", () => {
    expect(parseDuration(`0.${"0".repeat(400)}1s`)).toBe(1);
  });
});

describe("DURATION_PATTERN (the JSON Schemas' pattern)", () => {
  // Strings of duration-like pieces, valid and not: the pattern and the parser must agree on each.
  const pieces = fc.constantFrom("0", "00", "1", "9", "10", ".", ".0", ".5", "ms", "s", "m", "h", "d", "w", "x", " ", "-");
  it("accepts exactly what parseDuration accepts", () => {
    fc.assert(fc.property(fc.array(pieces, { maxLength: 10 }).map((p) => p.join("")), (text) => {
      expect(DURATION_PATTERN.test(text)).toBe(parseDuration(text) !== undefined);
    }), { numRuns: 5000 });
  });

  it("accepts every well-formed duration (the generator above rarely writes one)", () => {
    const unit = fc.constantFrom("ms", "s", "m", "h", "d", "w");
    const amount = fc.tuple(fc.nat(1000), fc.option(fc.nat(99), { nil: undefined }))
      .map(([whole, fraction]) => (fraction === undefined ? String(whole) : `${whole}.${fraction}`));
    const durations = fc.array(fc.tuple(amount, unit), { minLength: 1, maxLength: 4 }).map((p) => p.map(([a, u]) => a + u).join(""));
    fc.assert(fc.property(durations, (text) => {
      expect(DURATION_PATTERN.test(text)).toBe(parseDuration(text) !== undefined);
      expect(parseDuration(text) !== undefined).toBe(/[1-9]/.test(text));
    }), { numRuns: 2000 });
  });
});

describe("requireDuration", () => {
  const limits = { maxMs: 365 * DAY };

  it("returns the milliseconds within the limits", () => {
    expect(requireDuration("--wait-timeout", "1w", limits)).toBe(7 * DAY);
    expect(requireDuration("--wait-timeout", "365d", limits)).toBe(365 * DAY);
  });

  it("names where the duration was given, the text and the problem", () => {
    expect(() => requireDuration("--wait-timeout", "soon", limits)).toThrow(new DurationError(
      '--wait-timeout: "soon" is not a duration such as 90s, 10m, 1h30m, 2d or 1w (numbers with a unit: ms, s, m, h, d or w)',
    ));
    expect(() => requireDuration("--since", "366d", limits)).toThrow(new DurationError('--since: "366d" is longer than the 365-day limit'));
    expect(() => requireDuration("X", "500ms", { maxMs: DAY, minMs: 1000 }))
      .toThrow(new DurationError('X: "500ms" is shorter than the 1-second minimum'));
  });

  it("says limits in the largest whole unit", () => {
    expect([365 * DAY, 90_000, 1500].map(durationLimitText)).toEqual(["365-day", "90-second", "1500-millisecond"]);
  });
});

describe("envDuration", () => {
  const limits = { minMs: 1000, maxMs: 3650 * DAY };

  it("reads the variable, or the fallback when it is unset or empty, spaces around it dropped", () => {
    expect(envDuration({}, "EPHEMERA_X", "7d", limits)).toBe(7 * DAY);
    expect(envDuration({ EPHEMERA_X: "" }, "EPHEMERA_X", "7d", limits)).toBe(7 * DAY);
    expect(envDuration({ EPHEMERA_X: " 1d12h\n" }, "EPHEMERA_X", "7d", limits)).toBe(36 * 3_600_000);
  });

  it("refuses a bad value, naming the variable", () => {
    expect(() => envDuration({ EPHEMERA_X: "7 days" }, "EPHEMERA_X", "7d", limits))
      .toThrow('EPHEMERA_X: "7 days" is not a duration such as');
  });
});

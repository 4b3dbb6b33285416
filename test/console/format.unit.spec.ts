// How the console writes times, durations and sizes.
import { age, bytes, duration, relative } from "../../services/console/web/src/format.js";

describe("the console's formats", () => {
  it("writes a duration with the two largest units", () => {
    expect(duration(4_200)).toBe("4.2s");
    expect(duration(42_000)).toBe("42s");
    expect(duration(252_000)).toBe("4m 12s");
    expect(duration(7_500_000)).toBe("2h 5m");
    expect(duration(273_600_000)).toBe("3d 4h");
    expect(duration(-5)).toBe("0.0s");
  });

  it("writes a time relative to now, and nothing for a missing or invalid one", () => {
    const now = Date.parse("2026-11-27T02:00:00Z");
    expect(relative("2026-11-27T04:05:00Z", now)).toBe("in 2h 5m");
    expect(relative("2026-11-27T01:55:00Z", now)).toBe("5m 0s ago");
    expect(age("2026-11-27T01:59:30Z", now)).toBe("30s");
    expect(age(undefined, now)).toBe("");
    expect(relative("not a date", now)).toBe("");
  });

  it("writes sizes in B, KiB and MiB, taking the API's 64-bit sizes as strings", () => {
    expect(bytes(54)).toBe("54 B");
    expect(bytes("20480")).toBe("20.0 KiB");
    expect(bytes(3 * 1024 * 1024)).toBe("3.0 MiB");
    expect(bytes(undefined)).toBe("0 B");
  });
});

// The durations of files are read by @ephemera/kit/duration, as eph's flags and the
// services' variables are: the validator accepts exactly the strings the parser reads.
import fc from "fast-check";
import { parseDuration } from "@ephemera/kit/duration";
import { basePlugin, baseSandbox, create } from "./invalid.testkit.js";
import { MAX_DURATION_MS } from "./names.js";
import { pluginViolations, sandboxViolations, validatePlugin, validateSandbox } from "./validate.js";
import { clone } from "./fixtures.testkit.js";

const ttlViolations = (duration: string) => {
  const doc = clone(baseSandbox());
  doc.spec.ttl.duration = duration;
  return sandboxViolations(doc).filter((v) => v.field === "spec.ttl.duration");
};
const timeoutViolations = (timeout: string) => {
  const doc = clone(basePlugin());
  create(0)(doc).timeout = timeout;
  return pluginViolations(doc).filter((v) => v.field === "spec.create[0].timeout");
};

describe("durations in files", () => {
  // Duration-like strings, well-formed or not, none empty (empty is "absent").
  const piece = fc.constantFrom("0", "1", "36", "400", ".", ".5", "ms", "s", "m", "h", "d", "w", "y", " ", "-");
  const texts = fc.array(piece, { minLength: 1, maxLength: 8 }).map((p) => p.join(""));

  it("a TTL and a step timeout are valid exactly when the parser reads them within 365 days", () => {
    fc.assert(fc.property(texts, (text) => {
      const ms = parseDuration(text);
      const valid = ms !== undefined && ms <= MAX_DURATION_MS.ttl;
      expect(ttlViolations(text).length === 0).toBe(valid);
      expect(timeoutViolations(text).length === 0).toBe(valid);
    }), { numRuns: 1000 });
  });

  it("take compound forms, decimals, weeks and milliseconds, and keep them as written", () => {
    for (const duration of ["1d12h", "1.5d", "1w", "90m", "500ms", "2d"]) {
      const doc = clone(baseSandbox());
      doc.spec.ttl.duration = duration;
      expect(validateSandbox(doc).spec?.ttl?.duration).toBe(duration);
      const plugin = clone(basePlugin());
      create(0)(plugin).timeout = duration;
      expect(validatePlugin(plugin).spec?.create[0]?.timeout).toBe(duration);
    }
  });

  it("name the rule and the problem: a malformed one, and one past the limit", () => {
    expect(timeoutViolations("10 minutes")).toEqual([{
      field: "spec.create[0].timeout", rule: "timeout-format",
      description: 'timeout "10 minutes" is not a duration such as 90s, 10m, 1h30m, 2d or 1w (numbers with a unit: ms, s, m, h, d or w)',
    }]);
    expect(timeoutViolations("365d1s")).toEqual([{
      field: "spec.create[0].timeout", rule: "timeout-range", description: 'timeout "365d1s" is longer than the 365-day limit',
    }]);
    expect(ttlViolations("2 days")).toEqual([{
      field: "spec.ttl.duration", rule: "ttl-duration",
      description: 'duration "2 days" is not a duration such as 90s, 10m, 1h30m, 2d or 1w (numbers with a unit: ms, s, m, h, d or w)',
    }]);
  });
});

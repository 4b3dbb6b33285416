import { eventsStart } from "./events.js";
import { UsageError } from "./errors.js";

describe("eph events: where the watch starts", () => {
  it("sends --since as milliseconds and --after as a position; neither leaves the server's default", () => {
    expect(eventsStart({ since: "10m" })).toEqual({ sinceMs: 600_000 });
    expect(eventsStart({ after: "1234" })).toEqual({ afterPosition: 1234, sinceMs: 0 });
    expect(eventsStart({ after: "0" })).toEqual({ afterPosition: 0, sinceMs: 0 });
    expect(eventsStart({})).toEqual({ sinceMs: 0 });
  });

  it("refuses a bad position, a bad duration and both at once, naming the flag", () => {
    expect(() => eventsStart({ after: "-1" })).toThrow(UsageError);
    expect(() => eventsStart({ after: "12x" })).toThrow("--after: \"12x\" is not a stream position");
    expect(() => eventsStart({ since: "ten minutes" })).toThrow("--since");
    expect(() => eventsStart({ since: "10m", after: "3" })).toThrow("give one of them, not both");
  });
});

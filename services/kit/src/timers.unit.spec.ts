// Timers longer than setTimeout can hold (2^31-1 ms, about 24.8 days) are chained, not
// overflowed: Node fires an overflowed timer after 1 ms.
import { DueIndex, MAX_TIMER_MS, longTimeout } from "./timers.js";
import { delay } from "./wait.js";

const DAY_MS = 86_400_000;

describe("longTimeout", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it("fires once, at its time, past the limit of one setTimeout", () => {
    let fired = 0;
    longTimeout(() => fired++, 1000 * 3_600_000); // a 1000 h step timeout
    jest.advanceTimersByTime(1);
    expect(fired).toBe(0);
    jest.advanceTimersByTime(MAX_TIMER_MS);
    expect(fired).toBe(0);
    jest.advanceTimersByTime(1000 * 3_600_000 - MAX_TIMER_MS - 2);
    expect(fired).toBe(0);
    jest.advanceTimersByTime(1);
    expect(fired).toBe(1);
    jest.advanceTimersByTime(400 * DAY_MS);
    expect(fired).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
  });

  it("fires a short delay as setTimeout would", () => {
    let fired = 0;
    longTimeout(() => fired++, 500);
    jest.advanceTimersByTime(499);
    expect(fired).toBe(0);
    jest.advanceTimersByTime(1);
    expect(fired).toBe(1);
  });

  it("can be cancelled in the middle of its chain", () => {
    let fired = 0;
    const timer = longTimeout(() => fired++, 365 * DAY_MS);
    jest.advanceTimersByTime(100 * DAY_MS); // past the first four links
    timer.clear();
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(400 * DAY_MS);
    expect(fired).toBe(0);
  });

  it("never fires for an infinite delay, and fires at once for a negative one", () => {
    let fired = 0;
    const never = longTimeout(() => fired++, Infinity);
    jest.advanceTimersByTime(1000 * DAY_MS);
    expect(fired).toBe(0);
    never.clear();
    longTimeout(() => fired++, -5);
    jest.advanceTimersByTime(0);
    expect(fired).toBe(1);
  });
});

describe("delay", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it("waits past the limit of one setTimeout instead of resolving at once", async () => {
    let done = false;
    const waiting = delay(30 * DAY_MS).then(() => { done = true; });
    await jest.advanceTimersByTimeAsync(MAX_TIMER_MS);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(30 * DAY_MS - MAX_TIMER_MS);
    await waiting;
    expect(done).toBe(true);
  });
});

describe("DueIndex paused (a replica without its timers' lease)", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it("keeps what comes due but fires nothing until armed, then fires what is due at once", async () => {
    const fired: string[] = [];
    const index = new DueIndex(async (ids) => { fired.push(...ids); for (const id of ids) index.set(id, undefined); });
    index.pause();
    index.set("a", Date.now() + 1000);
    await jest.advanceTimersByTimeAsync(5000);
    expect(fired).toEqual([]);
    expect(index.dueNow()).toEqual(["a"]);
    index.arm();
    await jest.advanceTimersByTimeAsync(0);
    expect(fired).toEqual(["a"]);
    // Paused again: a later timer waits for the next arm().
    index.pause();
    index.set("b", Date.now() + 1000);
    await jest.advanceTimersByTimeAsync(5000);
    expect(fired).toEqual(["a"]);
    index.stop();
  });

  it("stays paused when paused while it fires", async () => {
    let release!: () => void;
    const fired: string[] = [];
    const index = new DueIndex(async (ids) => { fired.push(...ids); await new Promise<void>((r) => (release = r)); });
    index.set("a", Date.now());
    await jest.advanceTimersByTimeAsync(0);
    expect(fired).toEqual(["a"]);
    index.pause();
    release();
    // "a" is still due (the command did not clear it) but nothing fires while paused.
    await jest.advanceTimersByTimeAsync(5000);
    expect(fired).toEqual(["a"]);
    index.stop();
  });
});

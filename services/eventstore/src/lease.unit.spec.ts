import { waitFor } from "@ephemera/kit";
import { InMemoryLeaseStore, Lease } from "./lease.js";
import { leaseContract } from "./lease-contract.testkit.js";

leaseContract("in-memory", async () => ({ store: new InMemoryLeaseStore(), dispose: async () => undefined }));

describe("Lease options", () => {
  it("refuses a name that is not a key and a ttl too short to renew", () => {
    const store = new InMemoryLeaseStore();
    expect(() => Lease.hold(store, { name: "a.b", holder: "h", ttlMs: 1000 })).toThrow(`lease name "a.b" must be 1-200 letters, digits, '-' or '_'`);
    expect(() => Lease.hold(store, { name: "a", holder: "h", ttlMs: 5 })).toThrow("lease ttlMs must be at least 30 ms (got 5)");
  });
});

describe("Lease held", () => {
  it("is false once the clock passes the claim's end less the skew, even before the loss timer fires", async () => {
    const store = new InMemoryLeaseStore();
    let clock = 1_000_000;
    const lease = Lease.hold(store, { name: "role", holder: "h", ttlMs: 60_000, maxSkewMs: 1000, now: () => clock });
    try {
      await waitFor(() => lease.held, { what: "the lease to be held" });
      // The claim ends at 1_060_000 by this clock; the loss timer (59 s of real time) has not fired.
      clock = 1_058_999;
      expect(lease.held).toBe(true);
      clock = 1_059_000;
      expect(lease.held).toBe(false);
    } finally {
      await lease.stop();
    }
  });
});

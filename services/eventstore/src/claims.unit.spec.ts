import { InMemoryClaimStore } from "./claims.js";
import { claimStoreContract } from "./claims-contract.testkit.js";

claimStoreContract("in memory", async () => {
  const clock = { now: 1_000_000 };
  const store = new InMemoryClaimStore(() => clock.now);
  return { store, clock, setAvailable: async (a) => store.setAvailable(a), dispose: async () => undefined };
  // The twin fails at once; the bound is for a machine whose event loop is busy with other suites.
}, { failsWithinMs: 1_000 });

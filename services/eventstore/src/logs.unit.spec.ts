import { InMemoryLogStore } from "./logs.js";
import { logStoreContract } from "./logs-contract.testkit.js";

logStoreContract("in-memory", async (options = {}) => {
  const store = new InMemoryLogStore(options);
  return { store, setAvailable: async (available) => store.setAvailable(available), dispose: async () => undefined };
}, { failsWithinMs: 50 });

import { InMemoryValueStore } from "./values.js";
import { valueStoreContract } from "./values-contract.testkit.js";

valueStoreContract("in memory", async () => {
  const store = new InMemoryValueStore();
  return { store, setAvailable: async (a) => store.setAvailable(a), dispose: async () => undefined };
}, { failsWithinMs: 100 });

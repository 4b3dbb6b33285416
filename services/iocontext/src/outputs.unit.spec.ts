import { InMemoryOutputStore } from "./outputs.memory.js";
import { outputStoreContract } from "./outputs-contract.testkit.js";

outputStoreContract("in-memory", async () => {
  const store = new InMemoryOutputStore();
  return { store, setAvailable: async (available) => store.setAvailable(available), dispose: async () => undefined };
}, { failsWithinMs: 500 });

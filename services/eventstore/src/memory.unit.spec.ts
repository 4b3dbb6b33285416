import { InMemoryEventStore } from "./memory.js";
import { eventStoreContract } from "./contract.testkit.js";

eventStoreContract("in-memory", async () => {
  const store = new InMemoryEventStore();
  return {
    store,
    reopen: async () => store,
    shortWindow: async () => new InMemoryEventStore({ duplicateWindowMs: 1000 }),
    dispose: async () => store.close(),
  };
});

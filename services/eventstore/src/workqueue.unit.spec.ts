import { InMemoryWorkQueue } from "./workqueue-memory.js";
import { workQueueContract } from "./workqueue-contract.testkit.js";

workQueueContract("in-memory", async () => {
  const queue = new InMemoryWorkQueue<{ n: number }>({ ackWaitMs: 1000 });
  return {
    open: async () => queue,
    // Items are handed out as workers free up: nothing is held anywhere but the queue.
    delivered: async () => undefined,
    down: async () => {
      const q = new InMemoryWorkQueue<{ n: number }>();
      q.setAvailable(false);
      return q;
    },
    dispose: async () => undefined,
  };
});

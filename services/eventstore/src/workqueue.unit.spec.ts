import { InMemoryWorkQueue } from "./workqueue.js";
import { workQueueContract } from "./workqueue-contract.testkit.js";

workQueueContract("in-memory", async () => {
  const queue = new InMemoryWorkQueue<{ n: number }>({ ackWaitMs: 1000 });
  return {
    open: async () => queue,
    down: async () => {
      const q = new InMemoryWorkQueue<{ n: number }>();
      q.setAvailable(false);
      return q;
    },
    dispose: async () => undefined,
  };
});

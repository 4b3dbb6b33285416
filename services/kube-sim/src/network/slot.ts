// A slot is this machine's share of the service range a kube-sim routes: slot n owns
// 10.96.n.0/24 and the iptables chains `KSIM<n>-…`. It is held by listening on an abstract
// Unix socket named after it: the kernel gives each name to one process at a time and frees
// it when that process dies, however it dies, so two kube-sims never route the same range,
// and the chains of a slot nobody holds are a killed kube-sim's leftovers.
import { createServer, type Server } from "node:net";

export const SLOTS = 256;

export interface Slot { n: number; release(): Promise<void> }

const socketName = (n: number) => `\0ephemera-kube-sim-slot-${n}`;

/** Holds slot `n`, or answers undefined when another process (or this one) holds it. */
export function claimSlot(n: number): Promise<Slot | undefined> {
  return new Promise((resolve, reject) => {
    const server: Server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? resolve(undefined) : reject(err)));
    server.listen({ path: socketName(n) }, () => {
      server.unref();
      resolve({ n, release: () => new Promise<void>((ok) => server.close(() => ok())) });
    });
  });
}

export class NoFreeSlotError extends Error {
  override readonly name = "NoFreeSlotError";
}

/** The lowest free slot. */
export async function claimFreeSlot(): Promise<Slot> {
  for (let n = 0; n < SLOTS; n++) {
    const slot = await claimSlot(n);
    if (slot) return slot;
  }
  throw new NoFreeSlotError(`all ${SLOTS} service ranges of 10.96.0.0/16 are held by running kube-sims`);
}

// Mutual exclusion by key within this process: a task runs once every key it names is
// free. Keys are taken in sorted order, so two tasks never wait on each other.

export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(keys: string[], task: () => Promise<T>): Promise<T> {
    const sorted = [...new Set(keys)].sort();
    const releases: Array<() => void> = [];
    try {
      for (const key of sorted) {
        const before = this.tails.get(key) ?? Promise.resolve();
        let release!: () => void;
        const mine = new Promise<void>((r) => (release = r));
        const tail = before.then(() => mine);
        this.tails.set(key, tail);
        releases.push(() => { release(); if (this.tails.get(key) === tail) this.tails.delete(key); });
        await before;
      }
      return await task();
    } finally {
      for (const r of releases) r();
    }
  }
}

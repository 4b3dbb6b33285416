// Counts of API calls by audit verb and resource (`list pods`, `get pods/log`), for tests
// that assert how a client uses the API. The kubelet writes to the store directly, so its
// updates are never counted; neither are /sim/* requests.
export interface StatsSnapshot {
  calls: Record<string, number>;
  containersStarted: number;
  podsRunning: number;
}

export class CallCounter {
  private calls: Record<string, number> = {};
  count(verb: string, resource: string): void {
    const key = `${verb} ${resource}`;
    this.calls[key] = (this.calls[key] ?? 0) + 1;
  }
  snapshot(): Record<string, number> { return { ...this.calls }; }
  reset(): void { this.calls = {}; }
}

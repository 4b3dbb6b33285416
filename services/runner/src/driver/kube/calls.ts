// The Kubernetes API calls the driver makes, counted by verb and resource (as the API
// server's audit log names them): a step should cost four writes (create and delete its
// token Secret and its pod) and no polling reads. The counts are logged by the runner and read by the bench.
import { ApiException } from "@kubernetes/client-node";

export type Verb = "get" | "list" | "watch" | "create" | "update" | "delete";

export class ApiCalls {
  private readonly byKey = new Map<string, number>();

  counted(verb: Verb, resource: string): void {
    const key = `${verb} ${resource}`;
    this.byKey.set(key, (this.byKey.get(key) ?? 0) + 1);
  }

  async count<T>(verb: Verb, resource: string, call: () => Promise<T>): Promise<T> {
    this.counted(verb, resource);
    return call();
  }

  /** `{"create pods": 3, "delete pods": 3, "get pods/log": 3, "list pods": 1, "watch pods": 1}` */
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.byKey].sort(([a], [b]) => a.localeCompare(b)));
  }

  writes(): number {
    let n = 0;
    for (const [key, count] of this.byKey) if (/^(create|update|patch|delete) /.test(key)) n += count;
    return n;
  }
}

/** The HTTP status of a failed call, if the API server answered. */
export const statusOf = (err: unknown): number | undefined => (err instanceof ApiException ? err.code : undefined);

/** Worth another try: throttled, a server error, or no answer at all. */
export function retryableApiError(err: unknown): boolean {
  const code = statusOf(err);
  return code === undefined || code === 429 || code >= 500;
}

// Admission of new sandboxes under a burst. A create of a sandbox that runs resources is held,
// in the order it came, while `waiting` sandboxes of its cluster are created and not yet
// started: no step of theirs taken by a runner. Held there, a burst waits before its creates
// return rather than in the work queue after them, so a sandbox is ready soon after its create
// returns and the first sandboxes of a burst are ready first. What is counted comes from the
// projections (any replica's count is the store's, a fold behind); each replica holds its own
// line. A create held past `timeoutMs` (or its call's deadline) is refused as unavailable,
// naming the wait; nothing of it was written. Updates, dry runs, deletes and sandboxes without
// resources are never held.
import { UnavailableError } from "@ephemera/kit";
import { workflowId } from "@ephemera/events";
import type { SandboxProjections } from "../core/projections.js";
import type { SandboxRecord } from "./state.js";

export interface AdmissionSettings {
  /** Sandboxes of one cluster created and not yet started beyond which creates wait (0: none wait). */
  waiting: number;
  /** How long a create may wait before it is refused. */
  timeoutMs: number;
}

export const DEFAULT_ADMISSION: AdmissionSettings = { waiting: 16, timeoutMs: 60_000 };

/** An admitted create: `done` once it is over (appended or not); `waited` when it was held. */
export interface Ticket { done: () => void; waited: boolean }

interface Waiter { cluster: string; resolve: () => void; reject: (err: Error) => void; timer: NodeJS.Timeout }

/** A step beyond queued: a runner took it (or it already ended). */
const STARTED = new Set(["running", "retrying", "succeeded", "failed", "cancelled"]);

export class Admission {
  /** Cluster → sandboxes created and not started (from the projections). */
  private readonly unstarted = new Map<string, Set<string>>();
  /** Cluster → creates admitted whose sandbox is not yet counted (a reservation per admitted call). */
  private readonly admitted = new Map<string, number>();
  private readonly line: Waiter[] = [];

  constructor(private readonly projections: SandboxProjections, private readonly settings: AdmissionSettings) {}

  /** How many sandboxes of `cluster` are counted against the bound, and how many creates wait. */
  counts(cluster: string): { unstarted: number; held: number } {
    return { unstarted: this.count(cluster), held: this.line.filter((w) => w.cluster === cluster).length };
  }

  /** Whether any create may be held (EPHEMERA_ADMISSION_WAITING above 0). */
  get enabled(): boolean {
    return this.settings.waiting > 0;
  }

  /** Every cluster's creates held now. */
  get held(): number {
    return this.line.length;
  }

  /** Counts again from the projections as they stand (at start, once restored or replayed). */
  rebuild(): void {
    this.unstarted.clear();
    for (const [name] of this.projections.sandboxes.entries()) this.observe(name);
  }

  /** Follows sandbox `name` after a change to it or to one of its workflows. */
  observe(name: string): void {
    if (!this.enabled) return;
    const state = this.projections.sandboxes.get(name)?.state;
    const cluster = state !== undefined && state.status !== "none" && this.unstartedNow(state) ? state.cluster : undefined;
    for (const [cluster, names] of this.unstarted) {
      if (names.delete(name) && names.size === 0) this.unstarted.delete(cluster);
    }
    if (cluster !== undefined) {
      let names = this.unstarted.get(cluster);
      if (!names) this.unstarted.set(cluster, (names = new Set()));
      names.add(name);
    }
    this.release();
  }

  /**
   * Resolves once a create on `cluster` may go on, with its ticket: `done` once the create is
   * over, from when its sandbox counts through the projections. Rejects with an UnavailableError
   * after the timeout, or when `signal` aborts.
   */
  admit(cluster: string, signal?: AbortSignal, deadline?: number): Promise<Ticket> {
    if (!this.enabled) return Promise.resolve({ done: () => undefined, waited: false });
    let reserved = true;
    const done = () => {
      if (!reserved) return;
      reserved = false;
      const n = (this.admitted.get(cluster) ?? 1) - 1;
      if (n > 0) this.admitted.set(cluster, n);
      else this.admitted.delete(cluster);
      this.release();
    };
    if (!this.line.some((w) => w.cluster === cluster) && this.count(cluster) < this.settings.waiting) {
      this.reserve(cluster);
      return Promise.resolve({ done, waited: false });
    }
    // Refused a second before the caller's own deadline, so it hears why rather than only that time ran out.
    const waitMs = Math.max(0, Math.min(this.settings.timeoutMs, deadline === undefined ? Infinity : deadline - Date.now() - 1_000));
    return new Promise<Ticket>((resolve, reject) => {
      const leave = () => {
        const i = this.line.indexOf(waiter);
        if (i >= 0) this.line.splice(i, 1);
        clearTimeout(waiter.timer);
        signal?.removeEventListener("abort", aborted);
      };
      const aborted = () => {
        leave();
        reject(new UnavailableError("the create was cancelled while it waited for admission"));
      };
      const waiter: Waiter = {
        cluster,
        resolve: () => { leave(); this.reserve(cluster); resolve({ done, waited: true }); },
        reject: (err) => { leave(); reject(err); },
        timer: setTimeout(() => {
          const { unstarted } = this.counts(cluster);
          waiter.reject(new UnavailableError(
            `the sandbox was not admitted within ${+(waitMs / 1000).toFixed(1)} s: ${unstarted} sandboxes of cluster ${cluster} ` +
            `are created and not yet started by a runner (at most ${this.settings.waiting} may be); nothing was written, try again`,
          ));
        }, waitMs),
      };
      if (signal?.aborted) return aborted();
      signal?.addEventListener("abort", aborted, { once: true });
      this.line.push(waiter);
    });
  }

  /** Refuses every held create (the service is stopping). */
  close(): void {
    for (const w of [...this.line]) w.reject(new UnavailableError("the service is stopping"));
  }

  private count(cluster: string): number {
    return (this.unstarted.get(cluster)?.size ?? 0) + (this.admitted.get(cluster) ?? 0);
  }

  private reserve(cluster: string): void {
    this.admitted.set(cluster, (this.admitted.get(cluster) ?? 0) + 1);
  }

  /** Lets held creates go on, first come first, while their cluster has room; one of a full cluster holds no other cluster's. */
  private release(): void {
    for (let i = 0; i < this.line.length;) {
      const w = this.line[i]!;
      if (this.count(w.cluster) < this.settings.waiting) w.resolve();
      else i++;
    }
  }

  /** Created, active, not ready, and no step of any of its create workflows taken by a runner. */
  private unstartedNow(state: SandboxRecord): boolean {
    if (state.status !== "active" || state.ready) return false;
    const pending = state.resources.filter((r) => r.status === "Pending" || r.status === "Provisioning");
    if (pending.length === 0 || pending.length !== state.resources.length) return false;
    return !pending.some((r) => {
      const progress = this.projections.workflows.get(workflowId(state.routingKey, r.name, "create"))?.state;
      return progress !== undefined && progress.steps.some((s) => STARTED.has(s.status));
    });
  }
}

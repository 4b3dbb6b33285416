// The order a group's waiting jobs are given to its pods: fair across submitters, FIFO within
// one. The next job is the oldest of the submitter served least recently (one never served
// first; ties by the oldest waiting job), so submitters with waiting jobs take turns and one
// who queues a hundred jobs does not hold back another's one. Pure: derived from the jobs'
// stream positions, so it is the same after a restart.

export interface QueueEntry {
  name: string;
  submitter: string;
  /** The submit's stream position. */
  queuedPosition: number;
}

/**
 * The job to run next among `waiting` (one group's queued jobs), given when each submitter
 * was last served (the stream position of their last assignment in the group).
 */
export function nextJob<E extends QueueEntry>(waiting: Iterable<E>, lastServed: ReadonlyMap<string, number>): E | undefined {
  const oldest = new Map<string, E>();
  for (const job of waiting) {
    const current = oldest.get(job.submitter);
    if (!current || job.queuedPosition < current.queuedPosition) oldest.set(job.submitter, job);
  }
  let best: E | undefined;
  for (const [submitter, job] of oldest) {
    if (!best) { best = job; continue; }
    const a = lastServed.get(submitter) ?? 0;
    const b = lastServed.get(best.submitter) ?? 0;
    if (a < b || (a === b && job.queuedPosition < best.queuedPosition)) best = job;
  }
  return best;
}

/** The whole order `nextJob` gives when pods take jobs one after another (what `eph job list` shows). */
export function queueOrder<E extends QueueEntry>(waiting: Iterable<E>, lastServed: ReadonlyMap<string, number>): E[] {
  const left = new Set(waiting);
  const served = new Map(lastServed);
  let turn = Math.max(0, ...served.values());
  const order: E[] = [];
  for (let next = nextJob(left, served); next; next = nextJob(left, served)) {
    order.push(next);
    left.delete(next);
    served.set(next.submitter, ++turn);
  }
  return order;
}

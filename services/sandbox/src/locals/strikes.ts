// The two-strikes rule of the tunnel health check (pure): a connected local whose tunnel
// fails one check may have met a blip; one that fails `limit` checks in a row has lost its
// tunnel. An answer that the session is open clears the count; a link no longer checked
// (disconnected, reconnected with another session) is forgotten.

/** What a tunnel said about one session: open, not open there (404), or nothing in time. */
export type Answer = "open" | "gone" | "unreachable";

/** A connected local's link as checked: routing key, local name and the session serving it. */
export interface Checked { routingKey: string; local: string; sessionId: string; answer: Answer }

/** Failed checks in a row, by link key. */
export type Strikes = ReadonlyMap<string, number>;

export const linkKey = (c: Pick<Checked, "routingKey" | "local" | "sessionId">): string => `${c.routingKey}/${c.local}/${c.sessionId}`;

/** The strikes after one round of checks, and the links that reached `limit` (their tunnel is lost). */
export function judge(before: Strikes, round: readonly Checked[], limit: number): { strikes: Strikes; lost: Checked[] } {
  const strikes = new Map<string, number>();
  const lost: Checked[] = [];
  for (const checked of round) {
    const key = linkKey(checked);
    if (checked.answer === "open") continue;
    const count = (before.get(key) ?? 0) + 1;
    strikes.set(key, count);
    // At the limit and after it: a disconnect that could not be written is tried again next round.
    if (count >= limit) lost.push(checked);
  }
  return { strikes, lost };
}

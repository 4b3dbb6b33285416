// Liveness of an HTTP/2 connection, either end: a PING every interval; no answer within the
// timeout, and the connection is lost (a workstation that vanished without closing its TCP
// connection, or a tunnel pod that did). Both ends use it, the server to end sessions.
import type { Http2Session } from "node:http2";

export interface Liveness { intervalMs: number; timeoutMs: number }

export const DEFAULT_LIVENESS: Liveness = { intervalMs: 2_000, timeoutMs: 5_000 };

/** Pings until stopped or lost; `onLost` is called at most once. Returns stop(). */
export function keepAlive(session: Http2Session, liveness: Liveness, onLost: (why: string) => void): () => void {
  let outstandingSince: number | undefined;
  let lastPing = 0;
  let stopped = false;
  const lost = (why: string) => {
    if (stopped) return;
    stop();
    onLost(why);
  };
  const tick = () => {
    if (session.destroyed || session.closed) return lost("the connection closed");
    const now = Date.now();
    if (outstandingSince !== undefined) {
      if (now - outstandingSince >= liveness.timeoutMs) lost(`no answer to a PING within ${liveness.timeoutMs} ms`);
      return;
    }
    if (now - lastPing < liveness.intervalMs) return;
    lastPing = outstandingSince = now;
    const sent = session.ping((err) => {
      if (err) return lost(`PING failed: ${err.message}`);
      outstandingSince = undefined;
    });
    if (!sent) outstandingSince = undefined;
  };
  // Checked more often than pinged, so a missing answer is noticed close to the timeout.
  const timer = setInterval(tick, Math.max(10, Math.min(liveness.intervalMs, liveness.timeoutMs) / 4));
  timer.unref();
  function stop() {
    stopped = true;
    clearInterval(timer);
  }
  return stop;
}

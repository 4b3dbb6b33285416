// Reading every message of one subject, up to its last one at the time of the call, with
// one temporary consumer: the log store reads a step's log this way (many messages). The
// event store reads an aggregate (a few commits) with message gets instead (jetstream.ts).
import { JetStreamApiError, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { UnavailableError } from "@ephemera/kit";

const NO_MESSAGE_FOUND = 10037;

/** The messages of `subject` in stream order, and the position of the last (0: none). */
export async function readSubject(
  js: JetStreamClient, jsm: JetStreamManager, stream: string, subject: string, timeoutMs = 15_000,
): Promise<{ messages: JsMsg[]; last: number }> {
  let last: number;
  try {
    const m = await jsm.streams.getMessage(stream, { last_by_subj: subject });
    if (!m) return { messages: [], last: 0 };
    last = m.seq;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === NO_MESSAGE_FOUND) return { messages: [], last: 0 };
    throw new UnavailableError(`read of ${subject} failed`, { cause: err });
  }
  const out: JsMsg[] = [];
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  try {
    const consumer = await js.consumers.get(stream, { filter_subjects: subject });
    const iterator = await consumer.consume();
    // The server can go away between the two calls: then the messages never come. Give up
    // after a deadline rather than wait for ever.
    timer = setTimeout(() => { timedOut = true; void iterator.close().catch(() => undefined); }, timeoutMs);
    try {
      for await (const m of iterator) {
        out.push(m);
        if (m.seq >= last) break;
      }
    } finally {
      await iterator.close().catch(() => undefined);
    }
  } catch (err) {
    throw new UnavailableError(`read of ${subject} failed`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
  if (timedOut || (out.at(-1)?.seq ?? 0) < last) {
    throw new UnavailableError(`read of ${subject} did not complete within ${timeoutMs} ms`);
  }
  return { messages: out, last };
}

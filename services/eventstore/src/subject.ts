// Reading every message of one subject, up to its last one at the time of the call:
// the event store reads an aggregate this way, the log store a step's log.
import { JetStreamApiError, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { UnavailableError } from "@ephemera/kit";

const NO_MESSAGE_FOUND = 10037;

/** The messages of `subject` in stream order, and the position of the last (0: none). */
export async function readSubject(
  js: JetStreamClient, jsm: JetStreamManager, stream: string, subject: string,
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
  const consumer = await js.consumers.get(stream, { filter_subjects: subject });
  const out: JsMsg[] = [];
  const iterator = await consumer.consume();
  try {
    for await (const m of iterator) {
      out.push(m);
      if (m.seq >= last) break;
    }
  } finally {
    await iterator.close();
  }
  return { messages: out, last };
}

// The tunnel's audit log in the event store: each session on `tunnel.<sessionId>` (opened,
// every connection it carried, closed) and whether each local workload is served now on
// `locals.<routingKey>`. A write that fails is logged and never ends a session: the bytes
// matter more to the workstation than their record, and the log says what was lost.
import { Aggregates, encode, type EventPayloads } from "@ephemera/events";
import { NO_AGGREGATE, type EventStore, type Expected } from "@ephemera/eventstore";
import { delay, isConcurrencyError, type Logger } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";

const SOURCE = "tunnel";

type TunnelEvent = "ephemera.tunnel.session_opened.v1" | "ephemera.tunnel.connection_closed.v1" | "ephemera.tunnel.session_closed.v1";

export class Audit {
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly store: EventStore, private readonly logger: Logger) {}

  /** The session's own aggregate: one writer (its session), so appends follow each other with the revision they made. */
  session(sessionId: string): SessionLog {
    let expected: Expected = NO_AGGREGATE;
    let chain = Promise.resolve();
    return {
      write: <T extends TunnelEvent>(type: T, data: EventPayloads[T]) => {
        chain = chain.then(async () => {
          const result = await this.store.append(Aggregates.tunnel, sessionId, expected, [encode({ type, data } as never)], { source: SOURCE });
          expected = { revision: result.revision, version: result.version };
        }).catch((err: unknown) => this.logger.error({ err, sessionId, type }, "tunnel: an audit event was not written"));
        this.track(chain);
      },
    };
  }

  localConnected(data: pb.LocalConnected): void {
    this.track(this.appendLocal(data.routingKey, "ephemera.locals.connected.v1", data));
  }

  localDisconnected(data: pb.LocalDisconnected): void {
    this.track(this.appendLocal(data.routingKey, "ephemera.locals.disconnected.v1", data));
  }

  /** Waits for every write begun so far. */
  async flush(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  /** A routing key's locals may be written by several sessions (and tunnel replicas): read, append, again on a conflict. */
  private async appendLocal<T extends "ephemera.locals.connected.v1" | "ephemera.locals.disconnected.v1">(
    routingKey: string, type: T, data: EventPayloads[T],
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const read = await this.store.read(Aggregates.locals, routingKey);
        await this.store.append(Aggregates.locals, routingKey, { revision: read.revision, version: read.version },
          [encode({ type, data } as never)], { source: SOURCE });
        return;
      } catch (err) {
        if (isConcurrencyError(err) && attempt < 8) { await delay(5 * attempt + Math.random() * 10); continue; }
        this.logger.error({ err, routingKey, type }, "tunnel: a locals event was not written");
        return;
      }
    }
  }

  private track(write: Promise<void>): void {
    this.pending.add(write);
    void write.finally(() => this.pending.delete(write));
  }
}

export interface SessionLog {
  write<T extends TunnelEvent>(type: T, data: EventPayloads[T]): void;
}

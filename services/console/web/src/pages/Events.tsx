// The event log: filtered by sandbox, type (a glob) and time (the URL keeps the filters), the
// last ones first loaded, then live.
import { useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { Link, useSearch } from "wouter";
import { navigate } from "wouter/use-browser-location";
import { query } from "../api";
import { ErrorBox, TableScroll } from "../components/common";
import { localTime } from "../format";
import { useEventStream, useTitle } from "../hooks";
import type { EphemeraEvent } from "../types";

/** The page keeps the newest this many. */
const KEEP = 2000;

function sandboxOf(event: EphemeraEvent): string | undefined {
  if (event.type?.startsWith("ephemera.sandbox.")) return event.subject;
  const data = event.data ?? {};
  if (typeof data.sandbox === "string") return data.sandbox;
  return undefined;
}

function EventRow({ event }: { event: EphemeraEvent }) {
  const sandbox = sandboxOf(event);
  const json = useMemo(() => JSON.stringify(event, null, 2), [event]);
  return (
    <tr>
      <td data-label="Time" className="nowrap" title={event.time}>{localTime(event.time)}</td>
      <td data-label="Type"><code>{event.type?.replace(/^ephemera\./, "")}</code></td>
      <td data-label="Subject">{sandbox ? <Link href={`/sandboxes/${encodeURIComponent(sandbox)}`}>{sandbox}</Link> : <span className="muted">{event.subject}</span>}</td>
      <td data-label="Event">
        <details>
          <summary>JSON</summary>
          <pre className="json">{json}</pre>
        </details>
      </td>
    </tr>
  );
}

function hoursAgo(hours: number): string {
  return new Date(Date.now() - hours * 3600_000).toISOString();
}

export function EventsPage() {
  useTitle("Events");
  const search = useSearch();
  const params = new URLSearchParams(search);
  const filters = { sandbox: params.get("sandbox") ?? "", type: params.get("type") ?? "", since: params.get("since") ?? "" };
  const qs = query(filters);
  const [events, setEvents] = useState<EphemeraEvent[]>([]);
  const [loaded, setLoaded] = useState(false);
  useEffect(() => { setEvents([]); setLoaded(false); }, [qs]);
  const stream = useEventStream(`/api/events/stream${qs}`, {
    snapshot: (data) => { setEvents(((data as { events?: EphemeraEvent[] }).events ?? []).slice(-KEEP)); setLoaded(true); },
    event: (data) => setEvents((list) => [...list.slice(-(KEEP - 1)), (data as { event: EphemeraEvent }).event]),
  });
  const form = useRef<HTMLFormElement>(null);
  const apply = (event?: FormEvent, since?: string) => {
    event?.preventDefault();
    const data = new FormData(form.current ?? undefined);
    navigate(`/events${query({
      sandbox: String(data.get("sandbox") ?? "").trim(),
      type: String(data.get("type") ?? "").trim(),
      since: since ?? String(data.get("since") ?? "").trim(),
    })}`, { replace: true });
  };
  const newestFirst = useMemo(() => [...events].reverse(), [events]);
  return (
    <>
      <div className="page-title">
        <h1>Events</h1>
        <span className="muted" role="status">{loaded ? `${events.length} events${stream.connected ? " · live" : ""}` : "loading…"}</span>
      </div>
      <form ref={form} className="filter-inputs filter-bar" onSubmit={apply} key={qs}>
        <label><span>Sandbox</span><input name="sandbox" defaultValue={filters.sandbox} placeholder="name" /></label>
        <label><span>Type</span><input name="type" defaultValue={filters.type} placeholder="ephemera.sandbox.*" /></label>
        <label><span>Since</span><input name="since" defaultValue={filters.since} placeholder="2026-11-27T00:00:00Z" /></label>
        <button type="submit">Filter</button>
        <span className="quick" role="group" aria-label="Since">
          <button type="button" onClick={() => apply(undefined, hoursAgo(1))}>Last hour</button>
          <button type="button" onClick={() => apply(undefined, hoursAgo(24))}>Last day</button>
          <button type="button" onClick={() => apply(undefined, "")}>All</button>
        </span>
      </form>
      {stream.error && <ErrorBox>{stream.error}</ErrorBox>}
      {loaded && !events.length && <p className="muted">No events match.</p>}
      {events.length > 0 && (
        <TableScroll label="Events">
          <table className="events cards-narrow">
            <thead><tr><th>Time</th><th>Type</th><th>Sandbox or subject</th><th>Event</th></tr></thead>
            <tbody>{newestFirst.map((e, i) => <EventRow key={e.id ?? `${e.seq ?? ""}-${i}`} event={e} />)}</tbody>
          </table>
        </TableScroll>
      )}
    </>
  );
}

// The sandboxes: filters kept in the URL (?status=&label=&q=), the rows live from the facade's
// stream (a snapshot, then upserts and removals) and virtualized so thousands stay smooth.
import { useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { useSearch } from "wouter";
import { navigate } from "wouter/use-browser-location";
import { api, query } from "../api";
import { ErrorBox } from "../components/common";
import { SandboxTable } from "../components/SandboxTable";
import { useEventStream, useTitle } from "../hooks";
import type { SandboxList, SandboxRow } from "../types";

interface Filters { status: string; labels: string[]; q: string }

function readFilters(search: string): Filters {
  const params = new URLSearchParams(search);
  return { status: params.get("status") ?? "", labels: params.getAll("label"), q: params.get("q") ?? "" };
}

function filterQuery(f: Filters): string {
  return query({ status: f.status, label: f.labels, q: f.q });
}

/** Rows kept by name; changes arriving together are drawn once, at the next frame. */
function useLiveRows(streamUrl: string) {
  const rows = useRef(new Map<string, SandboxRow>());
  const [version, setVersion] = useState(0);
  const [loaded, setLoaded] = useState(false);
  // Counts per status over every sandbox, for the chips: in the snapshot, then `counts` events.
  const [counts, setCounts] = useState<Record<string, number>>();
  const frame = useRef(0);
  const changed = () => {
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => { frame.current = 0; setVersion((v) => v + 1); });
  };
  useEffect(() => () => cancelAnimationFrame(frame.current), []);
  useEffect(() => { rows.current = new Map(); setLoaded(false); changed(); }, [streamUrl]);
  const stream = useEventStream(streamUrl, {
    snapshot: (data) => {
      const list = data as SandboxList;
      rows.current = new Map((list.sandboxes ?? []).map((r) => [r.name, r]));
      if (list.statuses) setCounts(list.statuses);
      setLoaded(true);
      changed();
    },
    upsert: (data) => { const row = (data as { row: SandboxRow }).row; rows.current.set(row.name, row); changed(); },
    remove: (data) => { rows.current.delete((data as { name: string }).name); changed(); },
    counts: (data) => setCounts((data as SandboxList).statuses ?? {}),
  });
  const sorted = useMemo(
    () => [...rows.current.values()].sort((a, b) => a.name.localeCompare(b.name)),
    [version],
  );
  return { rows: sorted, loaded, version, counts, ...stream };
}

/** How often at most the counts are fetched again while the rows change. */
const COUNTS_EVERY_MS = 5000;

/**
 * Counts per status from the list's answer where the stream brings none: fetched with the
 * filters, then again at most every few seconds while the live rows change.
 */
function useStatusCounts(listUrl: string | undefined, version: number) {
  const [counts, setCounts] = useState<Record<string, number>>({});
  const changed = useRef(false);
  useEffect(() => { changed.current = true; }, [version]);
  useEffect(() => {
    if (!listUrl) return;
    const load = () => {
      changed.current = false;
      api<SandboxList>(listUrl).then((list) => setCounts(list.statuses ?? {}), () => undefined);
    };
    load();
    const timer = setInterval(() => { if (changed.current) load(); }, COUNTS_EVERY_MS);
    return () => clearInterval(timer);
  }, [listUrl]);
  return counts;
}

export function SandboxesPage() {
  useTitle("Sandboxes");
  const search = useSearch();
  const filters = useMemo(() => readFilters(search), [search]);
  const qs = filterQuery(filters);
  const live = useLiveRows(`/api/sandboxes/stream${qs}`);
  const fetched = useStatusCounts(live.loaded && !live.counts ? `/api/sandboxes${qs}` : undefined, live.version);
  const counts = live.counts ?? fetched;
  const setFilters = (f: Filters) => navigate(`/sandboxes${filterQuery(f)}`, { replace: true });

  const [q, setQ] = useState(filters.q);
  useEffect(() => setQ(filters.q), [filters.q]);
  useEffect(() => {
    if (q === filters.q) return;
    const timer = setTimeout(() => setFilters({ ...filters, q }), 250);
    return () => clearTimeout(timer);
  }, [q]);

  const [labelText, setLabelText] = useState(filters.labels.join(", "));
  useEffect(() => setLabelText(filters.labels.join(", ")), [filters.labels]);
  const applyLabels = (event: FormEvent) => {
    event.preventDefault();
    const labels = labelText.split(/[,\s]+/).map((s) => s.trim()).filter(Boolean);
    setFilters({ ...filters, labels });
  };

  const statusNames = Object.keys(counts).sort();
  if (filters.status && !statusNames.includes(filters.status)) statusNames.push(filters.status);
  const all = Object.values(counts).reduce((a, b) => a + b, 0);
  return (
    <>
      <div className="page-title">
        <h1>Sandboxes</h1>
        <span className="muted" aria-live="polite">{live.loaded ? `${live.rows.length} shown` : "loading…"}</span>
      </div>
      <div className="filters">
        <div className="chips" role="group" aria-label="Status">
          <button type="button" className="chip" aria-pressed={!filters.status} onClick={() => setFilters({ ...filters, status: "" })}>
            All <span className="count">{all}</span>
          </button>
          {statusNames.map((s) => (
            <button key={s} type="button" className="chip" aria-pressed={filters.status === s}
              onClick={() => setFilters({ ...filters, status: filters.status === s ? "" : s })}>
              {s} <span className="count">{counts[s] ?? 0}</span>
            </button>
          ))}
        </div>
        <div className="filter-inputs">
          <label>
            <span>Name</span>
            <input type="search" value={q} placeholder="part of a name" onChange={(e) => setQ(e.target.value)} />
          </label>
          <form onSubmit={applyLabels} className="label-filter">
            <label>
              <span>Labels</span>
              <input type="text" value={labelText} placeholder="team=pay, env=dev*" onChange={(e) => setLabelText(e.target.value)}
                onBlur={applyLabels} />
            </label>
            <button type="submit">Filter</button>
          </form>
        </div>
      </div>
      {live.error && <ErrorBox>{live.error}</ErrorBox>}
      <SandboxTable rows={live.rows} />
      {live.loaded && !live.rows.length && <p className="muted">No sandbox matches.</p>}
    </>
  );
}

// One step of a resource's workflow: its attempts (each a link, ?attempt=N) and the log of the
// chosen one (the latest without N), streamed while it runs and kept scrolled to the end while
// the reader is there.
import { useEffect, useLayoutEffect, useRef, useState } from "react";
import { Link, useParams, useSearch } from "wouter";
import { query } from "../api";
import { ErrorBox, Facts, Loading, StatusBadge } from "../components/common";
import { duration, localTime, parseTime } from "../format";
import { useEventStream, useNow, useTitle } from "../hooks";
import { useLiveSandbox } from "../sandbox";
import type { StepAttempt } from "../types";

/** At most this much log is kept in the page; the start goes first. */
const MAX_LOG = 4 * 1024 * 1024;

function attemptTime(a: StepAttempt, now: number): string {
  const started = parseTime(a.startedAt);
  if (started === undefined) return a.queuedAt ? "queued" : "";
  return duration((parseTime(a.endedAt) ?? now) - started);
}

function StepLog({ url }: { url: string }) {
  const [text, setText] = useState("");
  const [ended, setEnded] = useState(false);
  const [runs, setRuns] = useState(0);
  const runCount = useRef(0);
  const pre = useRef<HTMLPreElement>(null);
  // The log's height when last drawn: the reader was at the end if the view reached it.
  const drawnHeight = useRef(0);
  useEffect(() => { setText(""); setEnded(false); setRuns(0); runCount.current = 0; drawnHeight.current = 0; }, [url]);
  const append = (more: string) => {
    setText((t) => { const all = t + more; return all.length > MAX_LOG ? all.slice(all.length - MAX_LOG) : all; });
  };
  const stream = useEventStream(ended ? undefined : url, {
    // A reconnection replays the log from its start.
    open: () => { setText(""); runCount.current = 0; setRuns(0); },
    run: (data) => {
      const run = data as { attempt?: number; runId?: string };
      if (runCount.current > 0) append(`\n── attempt ${run.attempt ?? "?"} (${run.runId ?? ""}) ──\n`);
      runCount.current += 1;
      setRuns(runCount.current);
    },
    chunk: (data) => append((data as { text?: string }).text ?? ""),
    end: () => setEnded(true),
  });
  // Follows the end while the reader is there: decided when the new text is laid out, from
  // where the reader's view is now against the height before it grew.
  useLayoutEffect(() => {
    const el = pre.current;
    if (!el) return;
    if (el.scrollTop + el.clientHeight >= drawnHeight.current - 24) el.scrollTop = el.scrollHeight;
    drawnHeight.current = el.scrollHeight;
  }, [text]);
  return (
    <section>
      <div className="section-title">
        <h2>Log</h2>
        <span className="muted" role="status">{ended ? "ended" : stream.connected ? "following…" : "connecting…"}{runs > 1 ? ` · ${runs} runs` : ""}</span>
      </div>
      {stream.error && !ended && <ErrorBox>{stream.error}</ErrorBox>}
      <pre className="log" data-testid="step-log" ref={pre} tabIndex={0} aria-label="Step log">{text}</pre>
    </section>
  );
}

export function StepPage() {
  const { name = "", resource = "", phase = "", step = "" } = useParams<{ name: string; resource: string; phase: string; step: string }>();
  const attempt = new URLSearchParams(useSearch()).get("attempt") ?? "";
  useTitle(`${step} · ${name}`);
  const { sandbox, error, notFound } = useLiveSandbox(name);
  const view = sandbox?.resources?.find((r) => r.name === resource)?.steps?.find((s) => s.name === step && (s.phase || "create") === phase);
  const running = view?.status === "Running";
  const now = useNow(1000, running);
  const base = `/sandboxes/${encodeURIComponent(name)}/resources/${encodeURIComponent(resource)}/${encodeURIComponent(phase)}/${encodeURIComponent(step)}`;
  const logUrl = `/api/sandboxes/${encodeURIComponent(name)}/logs${query({ resource, phase, step, attempt, follow: "1" })}`;
  const attempts = view?.attempts ?? [];
  return (
    <>
      <nav className="crumbs" aria-label="Breadcrumb">
        <Link href="/sandboxes">Sandboxes</Link> / <Link href={`/sandboxes/${encodeURIComponent(name)}`}>{name}</Link> / {resource} / {phase}
      </nav>
      <div className="page-title">
        <h1>{step}</h1>
        {view && <StatusBadge status={view.status} />}
      </div>
      {notFound && <ErrorBox>No sandbox named {name}.</ErrorBox>}
      {error && <ErrorBox>{error}</ErrorBox>}
      {!sandbox && !error && !notFound && <Loading />}
      {sandbox && !view && <p className="muted">This step has not run yet.</p>}
      {view && (
        <>
          {(view.reason || view.message) && <p className="status-message">{view.reason}{view.message ? `: ${view.message}` : ""}</p>}
          <Facts items={[["Attempt", view.attempt ? String(view.attempt) : undefined], ["Run", view.runId ? <code>{view.runId}</code> : undefined],
            ["Exit code", view.exitCode !== undefined ? String(view.exitCode) : undefined], ["Depends on", (view.dependsOn ?? []).join(", ")]]} />
          {attempts.length > 0 && (
            <section>
              <h2>Attempts</h2>
              <ol className="attempts">
                <li>
                  <Link href={base} aria-current={attempt === "" ? "page" : undefined}>Latest</Link>
                </li>
                {attempts.map((a) => (
                  <li key={a.attempt}>
                    <Link href={`${base}?attempt=${a.attempt ?? 0}`} aria-current={attempt === String(a.attempt) ? "page" : undefined}>
                      Attempt {a.attempt}
                    </Link>
                    <StatusBadge status={a.status} />
                    <span className="muted">{attemptTime(a, now)}</span>
                    <span className="muted" title={a.startedAt}>{localTime(a.startedAt || a.queuedAt)}</span>
                    {a.exitCode !== undefined && <span className="muted">exit {a.exitCode}</span>}
                    {a.reason && <span className="muted">{a.reason}</span>}
                  </li>
                ))}
              </ol>
            </section>
          )}
        </>
      )}
      {!notFound && <StepLog key={logUrl} url={logUrl} />}
    </>
  );
}

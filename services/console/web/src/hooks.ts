// Small hooks shared by the pages: a fetched resource, a live Server-Sent Events stream, a ticking clock.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, toLogin } from "./api";

export interface Fetched<T> { data?: T; error?: string; status?: number; loading: boolean; reload: () => void }

export function useFetch<T>(path: string | undefined): Fetched<T> {
  const [state, setState] = useState<{ data?: T; error?: string; status?: number; loading: boolean }>({ loading: true });
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    if (!path) return;
    const abort = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    api<T>(path, { signal: abort.signal }).then(
      (data) => setState({ data, loading: false }),
      (err: unknown) => {
        if (abort.signal.aborted) return;
        const e = err as { message?: string; status?: number };
        setState({ error: e.message ?? String(err), status: e.status, loading: false });
      },
    );
    return () => abort.abort();
  }, [path, generation]);
  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  return { ...state, reload };
}

/**
 * One function per event name, given the event's JSON; `open` (no data) is called at every
 * connection, a reconnection included, where the facade starts the stream over.
 */
export type StreamHandlers = Record<string, (data: unknown) => void>;

/** Codes after which reconnecting cannot help: the stream is closed and the error shown. */
const FINAL = new Set(["NOT_FOUND", "PERMISSION_DENIED", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "UNAUTHENTICATED"]);

/**
 * Follows an SSE stream of the facade while `url` is set. The browser reconnects by itself
 * after a dropped connection (the server's `retry:`); the facade's own `error` event with a
 * code that retrying cannot mend closes it. A refused connection (HTTP 401) closes the
 * EventSource at once: whoami then says whether the session ended.
 */
export function useEventStream(url: string | undefined, handlers: StreamHandlers): { error?: string; connected: boolean } {
  const current = useRef(handlers);
  current.current = handlers;
  const [error, setError] = useState<string>();
  const [connected, setConnected] = useState(false);
  const names = Object.keys(handlers).sort().join(",");
  useEffect(() => {
    if (!url) return;
    setError(undefined);
    const source = new EventSource(url);
    source.onopen = () => { setConnected(true); setError(undefined); current.current.open?.(undefined); };
    for (const name of names.split(",").filter((n) => n && n !== "open")) {
      source.addEventListener(name, (event) => {
        try {
          current.current[name]?.(JSON.parse((event as MessageEvent<string>).data));
        } catch (err) {
          setError(`bad ${name} event: ${String(err)}`);
        }
      });
    }
    source.addEventListener("error", (event) => {
      setConnected(false);
      const data = (event as MessageEvent<string>).data;
      if (typeof data === "string" && data) {
        let body: { error?: string; code?: string } = {};
        try { body = JSON.parse(data) as typeof body; } catch { body = { error: data }; }
        setError(body.error ?? "the stream failed");
        if (body.code === "UNAUTHENTICATED") toLogin();
        if (body.code && FINAL.has(body.code)) source.close();
        return;
      }
      if (source.readyState === EventSource.CLOSED) {
        setError("the live stream was refused; showing what was loaded");
        // A 401 here (the session ended) sends to the login page through api().
        void fetch("/api/whoami", { credentials: "same-origin" }).then((r) => { if (r.status === 401) toLogin(); }, () => undefined);
      }
    });
    return () => { source.close(); setConnected(false); };
  }, [url, names]);
  return { error, connected };
}

/** The time now, renewed every `everyMs` while the component is shown. */
export function useNow(everyMs: number, enabled = true): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!enabled) return;
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs, enabled]);
  return now;
}

export function useMediaQuery(query: string): boolean {
  const [matches, setMatches] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const list = window.matchMedia(query);
    const onChange = () => setMatches(list.matches);
    list.addEventListener("change", onChange);
    onChange();
    return () => list.removeEventListener("change", onChange);
  }, [query]);
  return matches;
}

/** The window's title while the page is shown: "<what> · ephemera". */
export function useTitle(what: string): void {
  useEffect(() => {
    document.title = what ? `${what} · ephemera` : "ephemera";
  }, [what]);
}

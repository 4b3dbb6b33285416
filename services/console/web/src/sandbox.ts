// A sandbox as the pages follow it: loaded once, then live from its stream (SandboxService.Watch).
import { useEffect, useState } from "react";
import { useEventStream, useFetch } from "./hooks";
import type { SandboxView } from "./types";

export function useLiveSandbox(name: string) {
  const path = `/api/sandboxes/${encodeURIComponent(name)}`;
  const loaded = useFetch<SandboxView>(path);
  const [live, setLive] = useState<SandboxView>();
  const [deleted, setDeleted] = useState(false);
  useEffect(() => { setLive(undefined); setDeleted(false); }, [name]);
  const notFound = loaded.status === 404;
  const stream = useEventStream(notFound ? undefined : `${path}/stream`, {
    sandbox: (data) => setLive(data as SandboxView),
    deleted: () => setDeleted(true),
  });
  return {
    sandbox: live ?? loaded.data,
    error: live ? undefined : loaded.error,
    notFound: notFound && !live,
    streamError: stream.error,
    deleted,
  };
}

/** The reasons of a sandbox that is where it should be or on its way there. */
const NORMAL = new Set(["", "Creating", "Updating", "Ready", "Deleting", "Deleted", "Pending"]);

export function isFailure(view: SandboxView): boolean {
  return !NORMAL.has(view.status?.reason ?? "") || !!view.renderError || (view.resources ?? []).some((r) => !!r.failure);
}

// A watch: a chunked stream of `{"type":…,"object":…}` lines. From resourceVersion "" or
// "0" it opens with the current objects as ADDED; from a kept resourceVersion it replays
// the changes since; from one older than the history it sends a 410 Expired ERROR and
// ends, which is what makes an informer re-list. With selectors, an object that leaves
// the selection is sent as DELETED and one that enters it as ADDED, as the real server does.
import type { IncomingMessage, ServerResponse } from "node:http";
import { apiVersionOf, keyOf, type ResourceType } from "../resources.js";
import type { Selector } from "../selectors.js";
import type { Change, Obj, Store } from "../store.js";
import { expired } from "../status.js";

export interface WatchOptions {
  store: Store;
  type: ResourceType;
  namespace: string | undefined;
  select: Selector;
  resourceVersion: string;
  timeoutSeconds: number | undefined;
  bookmarks: boolean;
  bookmarkEveryMs: number;
  /** How each object is sent (a Table row when kubectl asks for tables). */
  render: (obj: Obj) => unknown;
  /** End the stream abruptly after this many ms (an injected drop). */
  dropAfterMs: number | undefined;
}

/** Ends of the watches open now, for `POST /sim/watches/drop` (as an API server restart would cut them). */
const open = new Set<() => void>();

/** Cuts every open watch abruptly; returns how many there were. */
export function dropOpenWatches(): number {
  const n = open.size;
  for (const drop of [...open]) drop();
  return n;
}

export function serveWatch(req: IncomingMessage, res: ServerResponse, o: WatchOptions): void {
  res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-cache, private", "Transfer-Encoding": "chunked" });
  res.flushHeaders();
  const send = (type: string, object: unknown) => res.write(`${JSON.stringify({ type, object })}\n`);
  const key = keyOf(o.type);
  const inScope = (obj: Obj) => o.namespace === undefined || obj.metadata.namespace === o.namespace;

  const deliver = (c: Change) => {
    if (c.resource !== key || !inScope(c.object)) return;
    const now = c.type !== "DELETED" && o.select(c.object);
    const before = c.type === "ADDED" ? false : c.previous ? o.select(c.previous) : o.select(c.object);
    if (c.type === "DELETED") { if (before) send("DELETED", o.render(c.object)); return; }
    if (now && before) send("MODIFIED", o.render(c.object));
    else if (now) send("ADDED", o.render(c.object));
    else if (before) send("DELETED", o.render(c.object));
  };

  const rv = o.resourceVersion;
  if (rv === "" || rv === "0") {
    for (const obj of o.store.list(o.type, o.type.namespaced ? o.namespace : undefined)) if (o.select(obj)) send("ADDED", o.render(obj));
  } else {
    const changes = o.store.since(Number(rv));
    if (!changes) {
      send("ERROR", expired(`too old resource version: ${rv} (${o.store.compacted})`).toStatus());
      res.end();
      return;
    }
    changes.forEach(deliver);
  }
  const unsubscribe = o.store.subscribe(deliver);
  const timers: NodeJS.Timeout[] = [];
  const drop = () => { close(); res.destroy(); };
  const close = () => { unsubscribe(); timers.forEach((t) => clearTimeout(t)); open.delete(drop); };
  open.add(drop);
  res.on("close", close);
  req.on("close", close);
  if (o.timeoutSeconds !== undefined && o.timeoutSeconds > 0) timers.push(setTimeout(() => { close(); res.end(); }, o.timeoutSeconds * 1000));
  if (o.bookmarks) {
    timers.push(setInterval(() => send("BOOKMARK", {
      kind: o.type.kind, apiVersion: apiVersionOf(o.type), metadata: { resourceVersion: String(o.store.resourceVersion) },
    }), o.bookmarkEveryMs));
  }
  if (o.dropAfterMs !== undefined) timers.push(setTimeout(drop, o.dropAfterMs));
}

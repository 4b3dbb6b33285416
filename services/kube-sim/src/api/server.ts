// The HTTP front of the simulated API server: discovery, the resource routes
// (`/api/v1/namespaces/NS/pods/NAME/log`, `/apis/apps/v1/deployments`, …) mapped to CRUD,
// watch and logs, each counted by audit verb and resource, and failed on purpose when a
// fault is set. `/sim/*` is the control surface for tests.
import type { IncomingMessage, ServerResponse } from "node:http";
import { apiGroup, apiGroupList, apiVersions, findType, resourceList, type ResourceType } from "../resources.js";
import { both, fieldSelector, labelSelector } from "../selectors.js";
import { ApiError, badRequest, isApiError, requestEntityTooLarge, unsupportedMediaType } from "../status.js";
import type { Obj, Store } from "../store.js";
import type { Json } from "../patch.js";
import type { Faults } from "../sim/faults.js";
import type { CallCounter } from "../sim/stats.js";
import type { Admission } from "../admission/admit.js";
import type { Crud } from "./crud.js";
import { serveLog } from "./logs.js";
import { openapiGroupVersion, openapiRoot } from "./openapi.js";
import { decodeProtobuf, PROTOBUF } from "./protobuf.js";
import { toTable, wantsTable } from "./table.js";
import { serveWatch } from "./watch.js";

export interface ApiDeps {
  store: Store;
  crud: Crud;
  /** Mutating webhooks, called on create before the object is stored. */
  admission: Admission;
  faults: Faults;
  calls: CallCounter;
  logFile: (pod: Obj, container: string) => string;
  bookmarkEveryMs: number;
  /** `/sim/*` requests. */
  control: (req: IncomingMessage, res: ServerResponse, path: string, body: () => Promise<string>) => Promise<void>;
  address: () => string;
}

interface Route { type: ResourceType; namespace: string | undefined; name: string | undefined; subresource: string | undefined }

/** Pure: the resource route of a path, or undefined for anything else. */
export function parseRoute(path: string): Route | undefined {
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === "api" && parts.length >= 3) { group = ""; version = parts[1]!; rest = parts.slice(2); }
  else if (parts[0] === "apis" && parts.length >= 4) { group = parts[1]!; version = parts[2]!; rest = parts.slice(3); }
  else return undefined;
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3 && findType(group, version, rest[2]!)?.namespaced) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const type = findType(group, version, rest[0]!);
  if (!type || rest.length > 3) return undefined;
  return { type, namespace, name: rest[1], subresource: rest[2] };
}

function verbOf(method: string, route: Route, q: URLSearchParams): string {
  switch (method) {
    case "GET": return route.name ? "get" : q.get("watch") === "true" || q.get("watch") === "1" ? "watch" : "list";
    case "POST": return "create";
    case "PUT": return "update";
    case "PATCH": return "patch";
    case "DELETE": return route.name ? "delete" : "deletecollection";
    default: return method.toLowerCase();
  }
}

/** The real server's default `--max-request-body-bytes`: 3 MiB. */
export const MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024;

/** The request body; one over the limit is refused with 413 as soon as it passes the limit. */
const readBody = (req: IncomingMessage) => new Promise<Buffer>((resolve, reject) => {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (c: Buffer) => {
    size += c.length;
    if (size > MAX_REQUEST_BODY_BYTES) {
      req.removeAllListeners("data");
      req.resume();
      reject(requestEntityTooLarge(MAX_REQUEST_BODY_BYTES));
      return;
    }
    chunks.push(c);
  });
  req.on("end", () => resolve(Buffer.concat(chunks)));
  req.on("error", reject);
});

function parseJson(text: string): Json {
  try {
    return JSON.parse(text) as Json;
  } catch {
    throw badRequest("the body of the request could not be decoded as JSON");
  }
}

// What a create or update body may be in: JSON, and the protobuf kubectl ≥ 1.32 sends for
// built-in kinds (it does not fall back to JSON on a 415). YAML is not read.
const BODY_TYPES = ["application/json", PROTOBUF];

/** The object of a create, update or delete body, by its Content-Type; another media type is a 415. */
function objectOf(req: IncomingMessage, body: Buffer): Json {
  const type = (req.headers["content-type"] ?? "application/json").split(";")[0]!.trim().toLowerCase();
  if (type === PROTOBUF) return decodeProtobuf(body);
  if (type === "application/json" || type === "" || type === "*/*") return parseJson(body.toString("utf8"));
  throw unsupportedMediaType(BODY_TYPES);
}

function send(res: ServerResponse, code: number, body: unknown, headers: Record<string, string | string[]> = {}): void {
  // Bytes, not a string: Node writes the head with a string body in the body's encoding, which would turn
  // a header's latin1 characters (a webhook warning's UTF-8 bytes) into UTF-8 twice.
  const bytes = Buffer.from(JSON.stringify(body), "utf8");
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": bytes.length, ...headers });
  res.end(bytes);
}

/**
 * A webhook's warning as the real server sends it (kubectl prints "Warning: …"): `299 - "text"`,
 * its UTF-8 bytes as they are (Node writes a header string as latin1, one byte per character).
 */
const warningHeader = (text: string) => Buffer.from(`299 - ${JSON.stringify(text)}`, "utf8").toString("latin1");

function sendError(res: ServerResponse, err: ApiError): void {
  if (res.headersSent) { res.destroy(); return; }
  send(res, err.code, err.toStatus(), err.code === 429 ? { "Retry-After": "1" } : {});
}

export function handler(deps: ApiDeps) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    handle(deps, req, res).catch((err: unknown) => {
      sendError(res, isApiError(err) ? err : new ApiError(500, "InternalError", `an error on the server ("${(err as Error)?.message ?? String(err)}") has prevented the request from succeeding`));
    });
  };
}

async function handle(deps: ApiDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://kube-sim");
  const path = url.pathname.replace(/\/+$/, "") || "/";
  if (path.startsWith("/sim/")) return deps.control(req, res, path, async () => (await readBody(req)).toString("utf8"));
  if (req.method === "GET") {
    const doc = discovery(path, deps.address());
    if (doc) return send(res, 200, doc);
  }
  const route = parseRoute(path);
  if (!route) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
  const q = url.searchParams;
  const verb = verbOf(req.method ?? "GET", route, q);
  const resource = route.subresource ? `${route.type.plural}/${route.subresource}` : route.type.plural;
  deps.calls.count(verb, resource);
  const injected = deps.faults.apiError(verb, resource);
  if (injected) throw injected;
  if (route.subresource && !(route.type.subresources ?? []).includes(route.subresource)) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
  const ns = route.type.namespaced ? route.namespace : undefined;
  const { crud, store } = deps;
  const table = wantsTable(req.headers.accept);
  const render = (o: Obj) => (table ? toTable([o], o.metadata.resourceVersion, route.type, q.get("includeObject") === "Object", Date.now()) : o);

  switch (verb) {
    case "get": {
      const obj = crud.get(route.type, ns, route.name!);
      if (route.subresource === "log") {
        return serveLog(req, res, {
          pod: obj, container: q.get("container"), follow: q.get("follow") === "true", tailLines: q.has("tailLines") ? Number(q.get("tailLines")) : undefined,
          file: (c) => deps.logFile(obj, c), current: () => store.get(route.type, ns, route.name!),
        });
      }
      return send(res, 200, render(obj));
    }
    case "list": {
      const select = both(labelSelector(q.get("labelSelector")), fieldSelector(q.get("fieldSelector")));
      const rv = String(store.resourceVersion);
      const items = store.list(route.type, ns).filter(select);
      if (table) return send(res, 200, toTable(items, rv, route.type, q.get("includeObject") === "Object", Date.now()));
      return send(res, 200, { kind: `${route.type.kind}List`, apiVersion: route.type.group ? `${route.type.group}/${route.type.version}` : "v1", metadata: { resourceVersion: rv }, items });
    }
    case "watch": {
      const select = both(labelSelector(q.get("labelSelector")), fieldSelector(q.get("fieldSelector")));
      const timeout = q.get("timeoutSeconds");
      return serveWatch(req, res, {
        store, type: route.type, namespace: ns, select, resourceVersion: q.get("resourceVersion") ?? "",
        timeoutSeconds: timeout ? Number(timeout) : undefined, bookmarks: q.get("allowWatchBookmarks") === "true",
        bookmarkEveryMs: deps.bookmarkEveryMs, render, dropAfterMs: deps.faults.watchDrop(),
      });
    }
    case "create": {
      if (route.name) throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
      const body = objectOf(req, await readBody(req)) as unknown as Obj;
      const namespace = route.type.namespaced ? ns ?? (body?.metadata?.namespace as string | undefined) ?? "default" : undefined;
      const { object, warnings } = await deps.admission.admitCreate(route.type, namespace, body);
      const created = crud.create(route.type, ns, object);
      return send(res, 201, created, warnings.length ? { Warning: warnings.map(warningHeader) } : {});
    }
    case "update":
      return send(res, 200, crud.update(route.type, ns, route.name!, objectOf(req, await readBody(req)) as unknown as Obj, route.subresource));
    case "patch":
      return send(res, 200, crud.patch(route.type, ns, route.name!, req.headers["content-type"] ?? "", parseJson((await readBody(req)).toString("utf8")), route.subresource));
    case "delete": {
      const body = await readBody(req);
      const options = body.length ? (objectOf(req, body) as Record<string, unknown>) : {};
      const grace = q.get("gracePeriodSeconds") ?? options["gracePeriodSeconds"];
      const out = crud.delete(route.type, ns, route.name!, grace === undefined || grace === null ? undefined : Number(grace));
      return send(res, 200, out);
    }
    case "deletecollection": {
      const select = both(labelSelector(q.get("labelSelector")), fieldSelector(q.get("fieldSelector")));
      for (const o of store.list(route.type, ns).filter(select)) crud.delete(route.type, o.metadata.namespace, o.metadata.name, undefined);
      return send(res, 200, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success" });
    }
    default:
      throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
  }
}

function discovery(path: string, address: string): unknown {
  if (path === "/version") return { major: "1", minor: "32", gitVersion: "v1.32.0-kube-sim", gitCommit: "", gitTreeState: "clean", buildDate: "2024-12-11T00:00:00Z", goVersion: "go1.23", compiler: "gc", platform: "linux/amd64" };
  if (path === "/api") return apiVersions(address);
  if (path === "/apis") return apiGroupList();
  if (path === "/healthz" || path === "/readyz" || path === "/livez") return "ok";
  let m = /^\/api\/(v1)$/.exec(path);
  if (m) return resourceList("", m[1]!);
  m = /^\/apis\/([^/]+)\/([^/]+)$/.exec(path);
  if (m) return resourceList(m[1]!, m[2]!);
  m = /^\/apis\/([^/]+)$/.exec(path);
  if (m) return apiGroup(m[1]!);
  if (path === "/openapi/v3") return openapiRoot();
  m = /^\/openapi\/v3\/(.+)$/.exec(path);
  if (m) return openapiGroupVersion(m[1]!);
  return undefined;
}

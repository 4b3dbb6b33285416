// Calls to the console's facade (/api): JSON in and out, its errors as ApiError, and a 401 anywhere
// sends the browser to the login page with the way back.
import { navigate } from "wouter/use-browser-location";

export class ApiError extends Error {
  override name = "ApiError";
  constructor(message: string, readonly status: number, readonly code: string) {
    super(message);
  }
}

export function loginPath(): string {
  const here = window.location.pathname + window.location.search;
  return here.startsWith("/login") ? here : `/login?next=${encodeURIComponent(here)}`;
}

/** Sends the browser to /login unless it is there; the page it was on is kept in `next`. */
export function toLogin(): void {
  if (!window.location.pathname.startsWith("/login")) navigate(loginPath(), { replace: true });
}

async function errorOf(response: Response): Promise<ApiError> {
  let message = `${response.status} ${response.statusText}`;
  let code = "";
  try {
    const body = (await response.json()) as { error?: string; code?: string };
    if (body.error) message = body.error;
    code = body.code ?? "";
  } catch {
    // Not JSON (a proxy's page): the status line says what there is to say.
  }
  return new ApiError(message, response.status, code);
}

export interface CallOptions { method?: "GET" | "POST" | "DELETE"; body?: unknown; signal?: AbortSignal; redirectOn401?: boolean }

export async function api<T>(path: string, options: CallOptions = {}): Promise<T> {
  const method = options.method ?? "GET";
  const headers: Record<string, string> = { accept: "application/json" };
  // The facade refuses a state-changing request without it (its CSRF guard).
  if (method !== "GET") headers["x-ephemera-console"] = "1";
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: options.signal,
  });
  if (response.status === 401 && options.redirectOn401 !== false) toLogin();
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A query string from a record, repeated keys for arrays, empty values left out. */
export function query(params: Record<string, string | string[] | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    for (const v of Array.isArray(value) ? value : [value]) if (v) search.append(key, v);
  }
  const s = search.toString();
  return s ? `?${s}` : "";
}

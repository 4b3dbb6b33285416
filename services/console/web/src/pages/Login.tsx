// Sign in with an API token: the facade checks it with the API (WhoAmI) and keeps it in an
// HttpOnly cookie. An open API needs none, so the page goes straight back.
import { useEffect, useState, type FormEvent } from "react";
import { flushSync } from "react-dom";
import { useSearch } from "wouter";
import { navigate } from "wouter/use-browser-location";
import { api, ApiError, messageOf } from "../api";
import { useTitle } from "../hooks";
import { useSession } from "../session";
import type { WhoAmI } from "../types";

/** Only a path of this site: never an address elsewhere (`//host`, `https:`). */
function safeNext(next: string | null): string {
  return next && next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/login") ? next : "/sandboxes";
}

export function LoginPage() {
  useTitle("Sign in");
  const next = safeNext(new URLSearchParams(useSearch()).get("next"));
  const { user, setUser } = useSession();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (user?.open) navigate(next, { replace: true });
  }, [user, next]);
  const submit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const token = new FormData(event.currentTarget).get("token");
    setBusy(true);
    setError(undefined);
    try {
      const who = await api<WhoAmI>("/api/login", { method: "POST", body: { token }, redirectOn401: false });
      // The router re-renders at once on navigation: the user must be known by then, or the
      // page it goes to would send back here.
      flushSync(() => setUser(who));
      navigate(next, { replace: true });
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? `Not signed in: ${err.message}` : messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" className="login" tabIndex={-1}>
      <form className="login-form" onSubmit={(e) => void submit(e)}>
        <h1>ephemera</h1>
        <p className="muted">Sign in with an API token.</p>
        <label htmlFor="token">Token</label>
        <input id="token" name="token" type="password" autoComplete="current-password" required autoFocus />
        {error && <div className="error" role="alert">{error}</div>}
        <button type="submit" className="primary" disabled={busy}>{busy ? "Signing in…" : "Sign in"}</button>
      </form>
    </main>
  );
}

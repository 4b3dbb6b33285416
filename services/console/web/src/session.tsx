// Who is signed in (GET /api/whoami), shared by the pages: the header shows it, the pages offer
// an editor's actions only to editors and admins.
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from "react";
import { api, ApiError, messageOf } from "./api";
import type { WhoAmI } from "./types";

export interface Session {
  /** undefined while asking; null when the facade wants a token. */
  user: WhoAmI | null | undefined;
  error?: string;
  setUser: (user: WhoAmI | null) => void;
  refresh: () => void;
}

const SessionContext = createContext<Session>({ user: undefined, setUser: () => undefined, refresh: () => undefined });

export function SessionProvider({ children }: { children: ReactNode }) {
  const [user, setUser] = useState<WhoAmI | null | undefined>(undefined);
  const [error, setError] = useState<string>();
  const refresh = useCallback(() => {
    api<WhoAmI>("/api/whoami", { redirectOn401: false }).then(
      (who) => { setUser(who); setError(undefined); },
      (err: unknown) => {
        if (err instanceof ApiError && err.status === 401) setUser(null);
        else { setUser(null); setError(messageOf(err)); }
      },
    );
  }, []);
  useEffect(refresh, [refresh]);
  return <SessionContext.Provider value={{ user, error, setUser, refresh }}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  return useContext(SessionContext);
}

/** Editors and admins may change sandboxes; viewers only read (the API decides in the end). */
export function useCanEdit(): boolean {
  const { user } = useSession();
  return !!user && (user.open === true || user.role === "editor" || user.role === "admin");
}

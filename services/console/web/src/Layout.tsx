// The frame of every page: skip link, header with the sections and who is signed in, the page.
import type { ReactNode } from "react";
import { Link, useLocation } from "wouter";
import { navigate } from "wouter/use-browser-location";
import { api } from "./api";
import { useSession } from "./session";

const SECTIONS = [
  { href: "/sandboxes", label: "Sandboxes" },
  { href: "/plugins", label: "Plugins" },
  { href: "/events", label: "Events" },
  { href: "/routegroups", label: "Route groups" },
  { href: "/jobs", label: "Jobs" },
];

export function Layout({ children }: { children: ReactNode }) {
  const [location] = useLocation();
  const { user, setUser } = useSession();
  const signOut = async () => {
    await api("/api/logout", { method: "POST", redirectOn401: false }).catch(() => undefined);
    navigate("/login", { replace: true });
    setUser(null);
  };
  return (
    <>
      <a className="skip-link" href="#main">Skip to content</a>
      <header className="site-header">
        <Link href="/sandboxes" className="brand">ephemera</Link>
        <nav aria-label="Sections">
          <ul>
            {SECTIONS.map((s) => {
              const current = location === s.href || location.startsWith(`${s.href}/`);
              return (
                <li key={s.href}>
                  <Link href={s.href} aria-current={current ? "page" : undefined}>{s.label}</Link>
                </li>
              );
            })}
          </ul>
        </nav>
        {user && (
          <div className="user">
            <span data-testid="whoami">{user.name || "anonymous"} ({user.role || "viewer"})</span>
            {!user.open && <button type="button" className="link-button" onClick={() => void signOut()}>Sign out</button>}
          </div>
        )}
      </header>
      <main id="main" tabIndex={-1}>{children}</main>
    </>
  );
}

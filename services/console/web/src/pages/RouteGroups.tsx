// Route groups: which sandboxes each one's match selects now, and its endpoints.
import { Link, useParams } from "wouter";
import { ErrorBox, Facts, Loading, StatusBadge, TableScroll } from "../components/common";
import { localTime } from "../format";
import { useFetch, useTitle } from "../hooks";
import type { RouteGroupView } from "../types";

export function RouteGroupsPage() {
  useTitle("Route groups");
  const list = useFetch<{ routeGroups?: RouteGroupView[] }>("/api/routegroups");
  const groups = list.data?.routeGroups ?? [];
  return (
    <>
      <h1>Route groups</h1>
      {list.error && <ErrorBox>{list.error}</ErrorBox>}
      {list.loading && !list.data && <Loading />}
      {list.data && !groups.length && <p className="muted">No route group.</p>}
      {groups.length > 0 && (
        <TableScroll label="Route groups">
          <table className="cards-narrow">
            <thead><tr><th>Name</th><th>Status</th><th>Cluster</th><th>Sandboxes</th><th>Routing key</th><th>Message</th></tr></thead>
            <tbody>
              {groups.map((g) => (
                <tr key={g.name}>
                  <td data-label="Name"><Link href={`/routegroups/${encodeURIComponent(g.name)}`}>{g.name}</Link></td>
                  <td data-label="Status"><StatusBadge status={g.status?.reason} /></td>
                  <td data-label="Cluster">{g.spec?.cluster}</td>
                  <td data-label="Sandboxes">{g.sandboxes?.length ?? 0}</td>
                  <td data-label="Routing key"><code>{g.routingKey}</code></td>
                  <td data-label="Message">{g.status?.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
    </>
  );
}

export function RouteGroupPage() {
  const { name = "" } = useParams<{ name: string }>();
  useTitle(name);
  const got = useFetch<RouteGroupView>(`/api/routegroups/${encodeURIComponent(name)}`);
  const g = got.data;
  return (
    <>
      <nav className="crumbs" aria-label="Breadcrumb"><Link href="/routegroups">Route groups</Link> / {name}</nav>
      <div className="page-title"><h1>{name}</h1>{g && <StatusBadge status={g.status?.reason} />}</div>
      {got.error && <ErrorBox>{got.error}</ErrorBox>}
      {got.loading && !g && <Loading />}
      {g && (
        <>
          {g.status?.message && <p className="status-message">{g.status.message}</p>}
          <Facts items={[["Cluster", g.spec?.cluster], ["Routing key", g.routingKey ? <code>{g.routingKey}</code> : undefined],
            ["Description", g.spec?.description], ["Created", localTime(g.createdAt)], ["Updated", localTime(g.updatedAt)],
            ["Match", g.spec?.match ? <code>{JSON.stringify(g.spec.match)}</code> : undefined]]} />
          <section>
            <h2>Endpoints</h2>
            <TableScroll label="Endpoints">
              <table>
                <thead><tr><th>Name</th><th>Target</th><th>URL</th></tr></thead>
                <tbody>
                  {(g.endpoints ?? []).map((e) => (
                    <tr key={e.name}><td>{e.name}</td><td><code>{e.target}</code></td>
                      <td>{e.url && <a href={e.url} target="_blank" rel="noreferrer">{e.url}</a>}</td></tr>
                  ))}
                </tbody>
              </table>
            </TableScroll>
          </section>
          <section>
            <h2>Sandboxes</h2>
            {!(g.sandboxes ?? []).length ? <p className="muted">The match selects no sandbox.</p> : (
              <TableScroll label="Sandboxes">
                <table>
                  <thead><tr><th>Name</th><th>Ready</th><th>Routing key</th><th>Routed baselines</th></tr></thead>
                  <tbody>
                    {(g.sandboxes ?? []).map((s) => (
                      <tr key={s.name}>
                        <td><Link href={`/sandboxes/${encodeURIComponent(s.name ?? "")}`}>{s.name}</Link></td>
                        <td>{s.ready ? "yes" : "no"}</td><td><code>{s.routingKey}</code></td><td>{(s.routed ?? []).join(", ")}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableScroll>
            )}
          </section>
          {!!g.conflicts?.length && (
            <section>
              <h2>Conflicts</h2>
              <ul>{g.conflicts.map((c) => <li key={c.baseline}><code>{c.baseline}</code> is forked by {(c.sandboxes ?? []).join(", ")}: not routed under the group's key</li>)}</ul>
            </section>
          )}
        </>
      )}
    </>
  );
}

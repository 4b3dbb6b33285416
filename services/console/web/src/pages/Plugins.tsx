// The published resource plugins: each name with its versions and the sandboxes using them.
import { Link } from "wouter";
import { ErrorBox, Loading, TableScroll } from "../components/common";
import { localTime } from "../format";
import { useFetch, useTitle } from "../hooks";
import type { PluginVersion } from "../types";

export function PluginsPage() {
  useTitle("Plugins");
  const list = useFetch<{ plugins?: { name: string; versions?: PluginVersion[] }[] }>("/api/plugins");
  const plugins = list.data?.plugins ?? [];
  return (
    <>
      <h1>Plugins</h1>
      {list.error && <ErrorBox>{list.error}</ErrorBox>}
      {list.loading && !list.data && <Loading />}
      {list.data && !plugins.length && <p className="muted">No plugin is published.</p>}
      {plugins.length > 0 && (
        <TableScroll label="Plugins">
          <table className="cards-narrow">
            <thead><tr><th>Name</th><th>Version</th><th>Published</th><th>Used by</th></tr></thead>
            <tbody>
              {plugins.flatMap((p) => (p.versions ?? []).map((v, i) => (
                <tr key={`${p.name}@${v.version}`}>
                  <td data-label="Name">{i === 0 ? <strong>{p.name}</strong> : <span className="muted">{p.name}</span>}</td>
                  <td data-label="Version">
                    <Link href={`/plugins/${encodeURIComponent(p.name)}/${encodeURIComponent(v.version ?? "")}`}>{v.version}</Link>
                    {v.deleting && <span className="badge tone-off">deleting</span>}
                  </td>
                  <td data-label="Published">{localTime(v.createdAt)}</td>
                  <td data-label="Used by">
                    {(v.sandboxes ?? []).length === 0 ? <span className="muted">—</span> : (v.sandboxes ?? []).map((s, j) => (
                      <span key={s}>{j > 0 && ", "}<Link href={`/sandboxes/${encodeURIComponent(s)}`}>{s}</Link></span>
                    ))}
                  </td>
                </tr>
              )))}
            </tbody>
          </table>
        </TableScroll>
      )}
    </>
  );
}

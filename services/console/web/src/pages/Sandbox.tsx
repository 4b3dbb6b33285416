// One sandbox, live: its status in words, endpoints, workloads and resources (each resource's
// create and delete workflows as graphs), and an editor's actions (delete, retry).
import { useState } from "react";
import { Link, useParams } from "wouter";
import { api, messageOf } from "../api";
import { ErrorBox, Facts, Labels, Loading, StatusBadge, TableScroll } from "../components/common";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { ResourceSection } from "../components/ResourceSection";
import { localTime, relative } from "../format";
import { useNow, useTitle } from "../hooks";
import { isFailure, useLiveSandbox } from "../sandbox";
import { useCanEdit } from "../session";
import type { OutputValue, SandboxView } from "../types";

function FailureText({ view }: { view: SandboxView }) {
  // A resource's failure in its own words, unless the sandbox's message already says it.
  const said = view.status?.message ?? "";
  const failed = (view.resources ?? []).filter((r) => r.failure && !said.includes(`resource ${r.name}:`));
  return (
    <div className="failure" data-testid="failure-reason" role="status">
      <p><strong>{view.status?.reason || "Failed"}</strong>{view.status?.message ? `: ${view.status.message}` : ""}</p>
      {view.renderError && <p>{view.renderError}</p>}
      {failed.map((r) => (
        <p key={r.name}>
          Resource <strong>{r.name}</strong>: step <strong>{r.failure?.step}</strong> {r.failure?.reason || "failed"}
          {r.failure?.message ? `: ${r.failure.message}` : ""}
          {r.failure?.exitCode !== undefined ? ` (exit code ${r.failure.exitCode})` : ""}
        </p>
      ))}
    </div>
  );
}

function Actions({ view, onError }: { view: SandboxView; onError: (message: string | undefined) => void }) {
  const canEdit = useCanEdit();
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  if (!canEdit) return null;
  const path = `/api/sandboxes/${encodeURIComponent(view.name)}`;
  const run = async (action: () => Promise<unknown>) => {
    setBusy(true);
    onError(undefined);
    try { await action(); } catch (err) { onError(messageOf(err)); } finally { setBusy(false); }
  };
  const failed = (view.resources ?? []).some((r) => r.status === "Failed");
  const deleting = ["Deleting", "Deleted"].includes(view.status?.reason ?? "");
  return (
    <div className="actions">
      {failed && (
        <button type="button" data-testid="retry-sandbox" disabled={busy}
          onClick={() => void run(() => api(`${path}/retry`, { method: "POST" }))}>Retry</button>
      )}
      <button type="button" className="danger" data-testid="delete-sandbox" disabled={busy || view.status?.reason === "Deleted"}
        onClick={() => setConfirming(true)}>{deleting ? "Delete again" : "Delete"}</button>
      <ConfirmDialog open={confirming} title={`Delete ${view.name}?`} confirm="Delete"
        onCancel={() => setConfirming(false)}
        onConfirm={() => { setConfirming(false); void run(() => api(path, { method: "DELETE" })); }}>
        <p>Its resources' delete workflows run and its routes go. This cannot be undone.</p>
      </ConfirmDialog>
    </div>
  );
}

export function SandboxPage() {
  const { name = "" } = useParams<{ name: string }>();
  useTitle(name);
  const { sandbox, error, notFound, streamError, deleted } = useLiveSandbox(name);
  const [actionError, setActionError] = useState<string>();
  const [values, setValues] = useState<OutputValue[]>();
  const [valuesError, setValuesError] = useState<string>();
  const canEdit = useCanEdit();
  const now = useNow(5000);
  if (notFound) return <><h1>{name}</h1><ErrorBox>No sandbox named {name}. <Link href="/sandboxes">All sandboxes</Link></ErrorBox></>;
  if (!sandbox) return error ? <ErrorBox>{error}</ErrorBox> : <Loading />;
  const status = sandbox.status ?? {};
  const showValues = async () => {
    if (values) { setValues(undefined); return; }
    setValuesError(undefined);
    try {
      const body = await api<{ outputs?: OutputValue[] }>(`/api/sandboxes/${encodeURIComponent(name)}/outputs`);
      setValues(body.outputs ?? []);
    } catch (err) { setValuesError(messageOf(err)); }
  };
  const ttl = sandbox.spec?.ttl;
  return (
    <>
      <div className="page-title">
        <h1>{sandbox.name}</h1>
        <StatusBadge status={deleted ? "Deleted" : status.reason} />
        {!deleted && <Actions view={sandbox} onError={setActionError} />}
      </div>
      {deleted && <div className="notice" role="status">This sandbox has been deleted.</div>}
      {actionError && <ErrorBox>{actionError}</ErrorBox>}
      {streamError && <ErrorBox>{streamError}</ErrorBox>}
      {isFailure(sandbox) ? <FailureText view={sandbox} /> : status.message && <p className="status-message">{status.message}</p>}
      <Facts items={[
        ["Ready", status.ready ? "yes" : "no"],
        ["Cluster", sandbox.spec?.cluster],
        ["Routing key", sandbox.routingKey ? <code>{sandbox.routingKey}</code> : undefined],
        ["Created", localTime(sandbox.createdAt)],
        ["Updated", localTime(sandbox.updatedAt)],
        ["TTL", ttl?.duration ? `${ttl.duration}${ttl.offsetFrom ? ` from ${ttl.offsetFrom}` : ""}` : "none"],
        ["Deletion", status.scheduledDeleteTime ? `${localTime(status.scheduledDeleteTime)} (${relative(status.scheduledDeleteTime, now)})` : undefined],
        ["Labels", Object.keys(sandbox.spec?.labels ?? {}).length ? <Labels labels={sandbox.spec?.labels} /> : undefined],
        ["Description", sandbox.spec?.description],
      ]} />
      {!!sandbox.endpoints?.length && (
        <section>
          <h2>Endpoints</h2>
          <TableScroll label="Endpoints">
            <table className="cards-narrow">
              <thead><tr><th>Name</th><th>Target</th><th>URL</th><th>Baseline</th></tr></thead>
              <tbody>
                {sandbox.endpoints.map((e) => (
                  <tr key={e.name}>
                    <td data-label="Name">{e.name}</td><td data-label="Target"><code>{e.target}</code></td>
                    <td data-label="URL">{e.url && <a href={e.url} target="_blank" rel="noreferrer">{e.url}</a>}</td>
                    <td data-label="Baseline">{e.baselineUrl && <a href={e.baselineUrl} target="_blank" rel="noreferrer">{e.baselineUrl}</a>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
        </section>
      )}
      {!!sandbox.workloads?.length && (
        <section>
          <h2>Workloads</h2>
          <TableScroll label="Workloads">
            <table className="cards-narrow">
              <thead><tr><th>Kind</th><th>Name</th><th>Status</th><th>Workload</th><th>Hosts</th><th>Message</th></tr></thead>
              <tbody>
                {sandbox.workloads.map((w) => (
                  <tr key={`${w.kind}/${w.name}`}>
                    <td data-label="Kind">{w.kind}</td><td data-label="Name">{w.name}</td><td data-label="Status"><StatusBadge status={w.status} /></td>
                    <td data-label="Workload">{w.workload && <code>{w.workload}</code>}</td><td data-label="Hosts">{(w.hosts ?? []).join(", ")}</td>
                    <td data-label="Message">{w.message}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
        </section>
      )}
      <section>
        <div className="section-title">
          <h2>Resources</h2>
          {canEdit && (sandbox.resources ?? []).some((r) => r.outputs?.length) && (
            <button type="button" onClick={() => void showValues()} aria-pressed={!!values}>{values ? "Hide values" : "Show values"}</button>
          )}
        </div>
        {valuesError && <ErrorBox>{valuesError}</ErrorBox>}
        {!sandbox.resources?.length && <p className="muted">No resources.</p>}
        {(sandbox.resources ?? []).map((r) => (
          <ResourceSection key={r.name} sandbox={sandbox.name} resource={r} values={values} />
        ))}
      </section>
    </>
  );
}

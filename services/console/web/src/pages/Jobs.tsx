// Jobs and the runner groups that run them.
import { useState } from "react";
import { Link, useParams } from "wouter";
import { ErrorBox, Facts, Labels, Loading, StatusBadge, TableScroll } from "../components/common";
import { bytes, duration, localTime, parseTime } from "../format";
import { useFetch, useTitle } from "../hooks";
import type { JobRunnerGroupView, JobView } from "../types";

function ran(job: JobView): string {
  const started = parseTime(job.status?.startedAt);
  if (started === undefined) return "";
  return duration((parseTime(job.status?.endedAt) ?? Date.now()) - started);
}

export function JobsPage() {
  useTitle("Jobs");
  const [all, setAll] = useState(true);
  const jobs = useFetch<{ jobs?: JobView[] }>(all ? "/api/jobs?all=1" : "/api/jobs");
  const groups = useFetch<{ jobRunnerGroups?: JobRunnerGroupView[] }>("/api/jobrunnergroups");
  const list = jobs.data?.jobs ?? [];
  return (
    <>
      <div className="page-title">
        <h1>Jobs</h1>
        <label className="inline"><input type="checkbox" checked={all} onChange={(e) => setAll(e.target.checked)} /> Include ended jobs</label>
        <button type="button" onClick={() => { jobs.reload(); groups.reload(); }}>Refresh</button>
      </div>
      {jobs.error && <ErrorBox>{jobs.error}</ErrorBox>}
      {jobs.loading && !jobs.data && <Loading />}
      {jobs.data && !list.length && <p className="muted">No job.</p>}
      {list.length > 0 && (
        <TableScroll label="Jobs">
          <table className="cards-narrow">
            <thead><tr><th>Name</th><th>State</th><th>Runner group</th><th>Submitter</th><th>Queued</th><th>Ran</th><th>Exit</th></tr></thead>
            <tbody>
              {list.map((j) => (
                <tr key={j.name}>
                  <td data-label="Name"><Link href={`/jobs/${encodeURIComponent(j.name)}`}>{j.name}</Link></td>
                  <td data-label="State"><StatusBadge status={j.status?.state} /></td>
                  <td data-label="Runner group">{j.spec?.runnerGroup}</td>
                  <td data-label="Submitter">{j.submitter}</td>
                  <td data-label="Queued">{localTime(j.status?.queuedAt)}</td>
                  <td data-label="Ran">{ran(j)}</td>
                  <td data-label="Exit">{j.status?.exitCode ?? ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      <h2>Runner groups</h2>
      {groups.error && <ErrorBox>{groups.error}</ErrorBox>}
      {groups.data && !(groups.data.jobRunnerGroups ?? []).length && <p className="muted">No job runner group.</p>}
      {!!groups.data?.jobRunnerGroups?.length && (
        <TableScroll label="Runner groups">
          <table className="cards-narrow">
            <thead><tr><th>Name</th><th>Status</th><th>Cluster</th><th>Namespace</th><th>Pods</th><th>Image</th><th>Labels</th></tr></thead>
            <tbody>
              {groups.data.jobRunnerGroups.map((g) => (
                <tr key={g.name}>
                  <td data-label="Name">{g.name}</td>
                  <td data-label="Status"><StatusBadge status={g.status?.reason} /></td>
                  <td data-label="Cluster">{g.spec?.cluster}</td>
                  <td data-label="Namespace">{g.spec?.namespace}</td>
                  <td data-label="Pods">{g.status?.message || `${g.status?.readyPods ?? 0}/${g.status?.desiredPods ?? 0}`}</td>
                  <td data-label="Image"><code>{g.spec?.image}</code></td>
                  <td data-label="Labels"><Labels labels={g.spec?.labels} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
    </>
  );
}

export function JobPage() {
  const { name = "" } = useParams<{ name: string }>();
  useTitle(name);
  const got = useFetch<JobView>(`/api/jobs/${encodeURIComponent(name)}`);
  const job = got.data;
  const s = job?.status;
  return (
    <>
      <nav className="crumbs" aria-label="Breadcrumb"><Link href="/jobs">Jobs</Link> / {name}</nav>
      <div className="page-title"><h1>{name}</h1>{job && <StatusBadge status={s?.state} />}<button type="button" onClick={got.reload}>Refresh</button></div>
      {got.error && <ErrorBox>{got.error}</ErrorBox>}
      {got.loading && !job && <Loading />}
      {job && (
        <>
          {(s?.reason || s?.message) && <p className="status-message">{s?.reason}{s?.message ? `: ${s.message}` : ""}</p>}
          <Facts items={[
            ["Runner group", job.spec?.runnerGroup], ["Submitter", job.submitter], ["Pod", s?.pod],
            ["Routing key", job.routingKey ? <code>{job.routingKey}</code> : undefined],
            ["Exit code", s?.exitCode !== undefined ? String(s.exitCode) : undefined],
            ["Queued", localTime(s?.queuedAt)], ["Started", localTime(s?.startedAt)], ["Ended", localTime(s?.endedAt)], ["Ran", ran(job)],
            ["Labels", Object.keys(job.spec?.labels ?? {}).length ? <Labels labels={job.spec?.labels} /> : undefined],
          ]} />
          {job.spec?.script && <section><h2>Script</h2><pre className="script">{job.spec.script}</pre></section>}
          {!!job.spec?.command?.length && <section><h2>Command</h2><pre className="script">{job.spec.command.join(" ")}</pre></section>}
          <section>
            <h2>Artifacts</h2>
            {!(s?.artifacts ?? []).length ? <p className="muted">None stored.</p> : (
              <TableScroll label="Artifacts">
                <table>
                  <thead><tr><th>Path</th><th>Size</th><th>SHA-256</th></tr></thead>
                  <tbody>
                    {(s?.artifacts ?? []).map((a) => (
                      <tr key={a.path}><td><code>{a.path}</code></td><td>{bytes(a.size)}</td><td><code className="digest">{a.sha256}</code></td></tr>
                    ))}
                  </tbody>
                </table>
              </TableScroll>
            )}
          </section>
        </>
      )}
    </>
  );
}

// One resource of a sandbox: its plugin version, status, outputs, and its create and delete
// workflows as graphs. The plugin's spec gives every step (so a workflow not yet run shows,
// Pending); the resource's step views give statuses, attempts and the edges they ran with.
import { useMemo } from "react";
import { Link } from "wouter";
import { bytes } from "../format";
import { useFetch } from "../hooks";
import type { OutputValue, PluginDetail, ResourceView } from "../types";
import { workflow } from "../workflow";
import { StatusBadge, TableScroll } from "./common";
import { WorkflowGraph } from "./WorkflowGraph";

export function ResourceSection({ sandbox, resource, values }: { sandbox: string; resource: ResourceView; values?: OutputValue[] }) {
  const plugin = resource.plugin && resource.version
    ? `/api/plugins/${encodeURIComponent(resource.plugin)}/${encodeURIComponent(resource.version)}` : undefined;
  const spec = useFetch<PluginDetail>(plugin);
  const create = useMemo(() => workflow(sandbox, resource, "create", spec.data?.graphs?.create), [sandbox, resource, spec.data]);
  const del = useMemo(() => workflow(sandbox, resource, "delete", spec.data?.graphs?.delete), [sandbox, resource, spec.data]);
  const valueOf = (key: string | undefined) => values?.find((v) => v.resource === resource.name && v.key === key)?.value;
  return (
    <article className="resource" aria-labelledby={`resource-${resource.name}`}>
      <header>
        <h3 id={`resource-${resource.name}`}>{resource.name}</h3>
        {resource.plugin && (
          <Link href={`/plugins/${encodeURIComponent(resource.plugin)}/${encodeURIComponent(resource.version ?? "")}`}>
            {resource.plugin}@{resource.version}
          </Link>
        )}
        <StatusBadge status={resource.status} />
      </header>
      {resource.failure?.logTail && (
        <details className="log-tail">
          <summary>Last lines of {resource.failure.step}'s log</summary>
          <pre>{resource.failure.logTail}</pre>
        </details>
      )}
      <h4>Create</h4>
      <WorkflowGraph phase="create" steps={create.steps} edges={create.edges} />
      {(del.steps.length > 0 || spec.data) && (
        <>
          <h4>Delete</h4>
          <WorkflowGraph phase="delete" steps={del.steps} edges={del.edges} />
        </>
      )}
      {!!resource.outputs?.length && (
        <>
          <h4>Outputs</h4>
          <TableScroll label={`${resource.name} outputs`}>
            <table className="outputs">
              <thead><tr><th>Key</th><th>Size</th>{values && <th>Value</th>}</tr></thead>
              <tbody>
                {resource.outputs.map((o) => (
                  <tr key={o.key}>
                    <td><code>{o.key}</code></td><td>{bytes(o.size)}</td>
                    {values && <td><code className="value">{valueOf(o.key) ?? ""}</code></td>}
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
        </>
      )}
    </article>
  );
}

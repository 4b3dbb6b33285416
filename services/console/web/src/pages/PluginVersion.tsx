// One published plugin version: its create and delete workflows as graphs and each step's
// inputs and outputs, as its spec declares them.
import { useMemo } from "react";
import { Link, useParams } from "wouter";
import { ErrorBox, Facts, Loading, TableScroll } from "../components/common";
import { WorkflowGraph } from "../components/WorkflowGraph";
import { localTime } from "../format";
import { useFetch, useTitle } from "../hooks";
import type { Graph, PluginDetail, PluginStep } from "../types";

function inputSource(input: NonNullable<PluginStep["inputs"]>[number]): string {
  if (input.valueFromStep?.name) return `${input.valueFromStep.name}.${input.valueFromStep.output ?? ""}`;
  if (input.valueFromSandbox) return "sandbox parameter";
  return "";
}

function Steps({ steps }: { steps: PluginStep[] }) {
  return (
    <TableScroll label="Steps">
      <table>
        <thead><tr><th>Step</th><th>Inputs</th><th>Outputs</th><th>Timeout</th><th>Retries</th></tr></thead>
        <tbody>
          {steps.map((s) => (
            <tr key={s.name}>
              <td><strong>{s.name}</strong>
                {s.script && <details><summary>script</summary><pre className="script">{s.script}</pre></details>}
              </td>
              <td>
                <ul className="plain">
                  {(s.inputs ?? []).map((i) => (
                    <li key={i.name}><code>{i.name}</code>{inputSource(i) && <span className="muted"> ← {inputSource(i)}</span>}
                      {i.as?.env && <span className="muted"> as ${i.as.env}</span>}{i.as?.path && <span className="muted"> at {i.as.path}</span>}</li>
                  ))}
                </ul>
              </td>
              <td>
                <ul className="plain">
                  {(s.outputs ?? []).map((o) => (
                    <li key={o.name}><code>{o.name}</code>{o.valueFromPath && <span className="muted"> from {o.valueFromPath}</span>}
                      {o.description && <span className="muted"> — {o.description}</span>}</li>
                  ))}
                </ul>
              </td>
              <td>{s.timeout}</td>
              <td>{s.retries ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableScroll>
  );
}

function SpecGraph({ phase, graph }: { phase: string; graph: Graph | undefined }) {
  const steps = useMemo(() => (graph?.nodes ?? []).map((n) => ({
    name: n.name,
    detail: [n.inputs?.length ? `${n.inputs.length} in` : "", n.outputs?.length ? `${n.outputs.length} out` : ""].filter(Boolean).join(" · "),
  })), [graph]);
  return <WorkflowGraph phase={phase} steps={steps} edges={graph?.edges ?? []} withStatus={false} />;
}

export function PluginVersionPage() {
  const { name = "", version = "" } = useParams<{ name: string; version: string }>();
  useTitle(`${name}@${version}`);
  const detail = useFetch<PluginDetail>(`/api/plugins/${encodeURIComponent(name)}/${encodeURIComponent(version)}`);
  const plugin = detail.data?.plugin;
  return (
    <>
      <nav className="crumbs" aria-label="Breadcrumb"><Link href="/plugins">Plugins</Link> / {name}</nav>
      <h1>{name}@{version}</h1>
      {detail.error && <ErrorBox>{detail.error}</ErrorBox>}
      {detail.loading && !detail.data && <Loading />}
      {plugin && (
        <>
          {plugin.spec?.description && <p>{plugin.spec.description}</p>}
          <Facts items={[
            ["Published", localTime(plugin.createdAt)],
            ["Digest", plugin.digest ? <code className="digest">{plugin.digest}</code> : undefined],
            ["Runner image", plugin.spec?.runner?.image ? <code>{plugin.spec.runner.image}</code> : undefined],
            ["Namespace", plugin.spec?.runner?.namespace],
            ["Deleting", plugin.deleting ? "yes: no new sandbox may use it" : undefined],
            ["Used by", (plugin.sandboxes ?? []).length ? (plugin.sandboxes ?? []).map((s, i) => (
              <span key={s}>{i > 0 && ", "}<Link href={`/sandboxes/${encodeURIComponent(s)}`}>{s}</Link></span>
            )) : "no sandbox"],
          ]} />
          <section>
            <h2>Create</h2>
            <SpecGraph phase="create" graph={detail.data?.graphs?.create} />
            <Steps steps={plugin.spec?.create ?? []} />
          </section>
          <section>
            <h2>Delete</h2>
            <SpecGraph phase="delete" graph={detail.data?.graphs?.delete} />
            <Steps steps={plugin.spec?.delete ?? []} />
          </section>
        </>
      )}
    </>
  );
}

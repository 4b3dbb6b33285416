// Which webhooks a create goes to, as the API server decides: a rule naming the operation,
// group, version, resource and scope; the namespace's labels (the Namespace's own for a
// Namespace) and the object's labels through the selectors, read by selectors.ts. Pure.
import type { ResourceType } from "../resources.js";
import { labelSelector } from "../selectors.js";
import type { LabelSelectorSpec, RuleSpec, WebhookSpec } from "./configuration.js";

export interface AdmissionTarget {
  operation: "CREATE";
  type: ResourceType;
  /** The object's labels. */
  labels: Record<string, string>;
  /** The labels of its namespace; for a Namespace, its own; undefined for other cluster-scoped kinds. */
  namespaceLabels: Record<string, string> | undefined;
}

/** A LabelSelector (matchLabels, matchExpressions) as the `labelSelector` text the list API reads. */
export function selectorText(selector: LabelSelectorSpec | undefined): string {
  const terms = Object.entries(selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of selector?.matchExpressions ?? []) {
    const values = (e.values ?? []).join(",");
    switch (e.operator) {
      case "In": terms.push(`${e.key} in (${values})`); break;
      case "NotIn": terms.push(`${e.key} notin (${values})`); break;
      case "Exists": terms.push(e.key); break;
      case "DoesNotExist": terms.push(`!${e.key}`); break;
      default: throw new Error(`${e.operator} is not a valid label selector operator`);
    }
  }
  return terms.join(",");
}

const selects = (selector: LabelSelectorSpec | undefined, labels: Record<string, string>) =>
  labelSelector(selectorText(selector))({ metadata: { labels } });

const any = (list: string[] | undefined, value: string) => (list ?? []).some((v) => v === "*" || v === value);

// A rule's resource `pods` or `*`, with no subresource or the subresource `*`, matches a create of
// the resource itself; one naming a subresource (`status`) matches only that, which is never admitted here.
function resourceMatches(resources: string[] | undefined, plural: string): boolean {
  return (resources ?? []).some((r) => {
    const [resource, sub = ""] = r.split("/");
    return (resource === "*" || resource === plural) && (sub === "*" || sub === "");
  });
}

export function ruleMatches(rule: RuleSpec, target: AdmissionTarget): boolean {
  const { type } = target;
  const scope = rule.scope ?? "*";
  if (scope === "Namespaced" && !type.namespaced) return false;
  if (scope === "Cluster" && type.namespaced) return false;
  return any(rule.operations, target.operation) && any(rule.apiGroups, type.group) && any(rule.apiVersions, type.version) && resourceMatches(rule.resources, type.plural);
}

export function webhookMatches(webhook: WebhookSpec, target: AdmissionTarget): boolean {
  if (!(webhook.rules ?? []).some((r) => ruleMatches(r, target))) return false;
  if (target.namespaceLabels !== undefined && !selects(webhook.namespaceSelector, target.namespaceLabels)) return false;
  return selects(webhook.objectSelector, target.labels);
}

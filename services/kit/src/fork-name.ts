// The name of a sandbox's fork of a workload (and of the fork's Service): what the Routes
// API sends traffic to and what the fork reconciler creates must agree. Also how a fork is
// named to people and in events: by the baseline it forks, and which kinds may be forked.
import { shortHash } from "./ids.js";

/** Longest DNS label (RFC 1123): a Service's name, and what its DNS host is made of. */
const DNS_LABEL_MAX = 63;

/**
 * Pure: `<baseline>-<routing key>`, a DNS label of at most 63 characters, the same for the
 * same fork. A baseline name too long for that is cut and followed by a short hash of the
 * whole name (`<cut>-<hash>-<routing key>`), so that two baselines sharing a long prefix
 * still get two forks; a name that fits is never changed (forks already on a cluster keep
 * their names).
 */
export function forkName(baselineName: string, routingKey: string): string {
  const room = DNS_LABEL_MAX - 1 - routingKey.length;
  if (baselineName.length <= room) return `${baselineName}-${routingKey}`;
  const hash = shortHash(baselineName);
  const cut = baselineName.slice(0, Math.max(0, room - 1 - hash.length)).replace(/-+$/, "");
  return `${cut ? `${cut}-` : ""}${hash}-${routingKey}`;
}

/** What ends a local workload's Service name: a fork's ends with the routing key, so the two never meet. */
export const LOCAL_SUFFIX = "local";

/**
 * Pure: the name of a sandbox's Service without a selector that stands for a baseline
 * Service while a workstation serves a local workload: `<service>-<routing key>-local`,
 * cut as forkName cuts.
 */
export const localServiceName = (baselineService: string, routingKey: string) => forkName(baselineService, `${routingKey}-${LOCAL_SUFFIX}`);

/**
 * The kinds a fork may copy: Signadot's Deployment and (Argo) Rollout, and StatefulSet,
 * which ephemera's runner, router and webhook handle alike.
 */
export const FORK_KINDS = ["Deployment", "Rollout", "StatefulSet"] as const;
export type ForkKind = (typeof FORK_KINDS)[number];

export const isForkKind = (kind: string): kind is ForkKind => (FORK_KINDS as readonly string[]).includes(kind);

export interface BaselineRef {
  kind: string;
  namespace: string;
  name: string;
}

/** Pure: a fork's baseline with the defaults filled in (kind Deployment, namespace default). */
export function baselineOf(forkOf: { kind?: string; namespace?: string; name?: string } | undefined): BaselineRef {
  return { kind: forkOf?.kind || "Deployment", namespace: forkOf?.namespace || "default", name: forkOf?.name ?? "" };
}

/** Pure: `Deployment shop/orders`, how events and views name a fork. */
export const baselineLabel = (b: BaselineRef) => `${b.kind} ${b.namespace}/${b.name}`;

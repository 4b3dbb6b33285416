// The name of a sandbox's fork of a workload (and of the fork's Service): what the Routes
// API sends traffic to and what the fork reconciler creates must agree. Also how a fork is
// named to people and in events: by the baseline it forks.

/** Pure: `<baseline>-<routing key>`, a DNS label of at most 63 characters (the baseline's name cut); the same for the same fork. */
export function forkName(baselineName: string, routingKey: string): string {
  return `${baselineName.slice(0, 62 - routingKey.length).replace(/-+$/, "")}-${routingKey}`;
}

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

// The name of a sandbox's fork of a workload (and of the fork's Service): what the Routes
// API sends traffic to and what the fork reconciler creates must agree.

/** Pure: `<baseline>-<routing key>`, a DNS label of at most 63 characters (the baseline's name cut); the same for the same fork. */
export function forkName(baselineName: string, routingKey: string): string {
  return `${baselineName.slice(0, 62 - routingKey.length).replace(/-+$/, "")}-${routingKey}`;
}

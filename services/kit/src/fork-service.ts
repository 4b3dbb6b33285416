// What `valueFrom.fork` reads: a sandbox's fork of a baseline is reached by the fork of the
// first (by name) baseline Service selecting the baseline's pods, and an expression renders
// its host and port. The runner writes fork env with it (runner/src/forks/build.ts) and the
// tunnel resolves a local workload's env with it, so both give the same value.
import { baselineLabel, baselineOf, forkName, type BaselineRef } from "./fork-name.js";
import { fieldsRead, parseForkExpression, renderForkExpression } from "./fork-expression.js";

/** The fork Service a `valueFrom.fork` expression reads, as `.Service.Host` and `.Service.Port`. */
export interface ForkService {
  /** The fork Service's name, and its baseline Service's. */
  name: string;
  baselineName: string;
  /** `<name>.<namespace>.svc`. */
  host: string;
  /** Its first port; undefined when it has none (a headless Service may have none). */
  port?: number;
}

/** A Service as the Kubernetes API gives it, as far as these functions read it. */
export interface ServiceLike {
  metadata?: { name?: string; labels?: Record<string, string> };
  spec?: { selector?: Record<string, string>; ports?: Array<{ port?: number }> };
}

/** A `valueFrom.fork`: the baseline whose fork is read, and the expression. */
export interface ForkValueRefLike {
  forkOf?: { kind?: string; namespace?: string; name?: string };
  expression: string;
}

/**
 * An env var reads `valueFrom.fork` of a fork whose Service it cannot name (ServiceNotFound),
 * or in a way the spec's validation should have refused (Rejected).
 */
export class ForkValueError extends Error {
  override readonly name = "ForkValueError";

  constructor(readonly reason: "ServiceNotFound" | "Rejected", message: string) {
    super(message);
  }
}

/** The label ephemera's fork Services carry: a fork's Service never stands for a baseline's. */
const FORK_LABEL = "ephemera.dev/fork";

/** Pure: the Services (of the baseline's namespace) whose selector matches the pod labels, forks' Services left out. */
export function servicesSelecting<S extends ServiceLike>(services: S[], podLabels: Record<string, string>): S[] {
  return services.filter((s) => {
    const selector = s.spec?.selector ?? {};
    const keys = Object.keys(selector);
    return keys.length > 0 && keys.every((k) => podLabels[k] === selector[k]) && !s.metadata?.labels?.[FORK_LABEL];
  });
}

/**
 * Pure: the fork Service a `valueFrom.fork` of a fork reads: of the baseline Services that
 * select its baseline's pods, the first by name (several may; one must be chosen the same
 * way each time), as the fork names it, with that Service's first port.
 */
export function forkServiceOf(baseline: BaselineRef, baselineServices: ServiceLike[], routingKey: string): ForkService | undefined {
  const [first] = baselineServices.map((s) => ({ s, name: String(s.metadata?.name ?? "") }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (!first) return undefined;
  const name = forkName(first.name, routingKey);
  const port = first.s.spec?.ports?.[0]?.port;
  return { name, baselineName: first.name, host: `${name}.${baseline.namespace}.svc`, ...(typeof port === "number" ? { port } : {}) };
}

/**
 * Pure: the value `envName` reads from another fork's Service, as the expression asks for it
 * (the host when it is empty). `forkServices` holds each fork of the sandbox by the
 * `baselineLabel` of its baseline (undefined: no Service selects its pods).
 */
export function forkValue(envName: string, from: ForkValueRefLike, forkServices: Map<string, ForkService | undefined>): string {
  const other = baselineOf(from.forkOf);
  const label = baselineLabel(other);
  const parsed = parseForkExpression(from.expression);
  const refuse = (reason: ForkValueError["reason"], why: string) =>
    new ForkValueError(reason, `env ${envName} reads valueFrom.fork of ${label}, but ${why}`);
  // The spec's validation refuses both before anything is written: these are for a spec that got past it.
  if ("problem" in parsed) throw refuse("Rejected", `its expression cannot be evaluated: ${parsed.problem}`);
  if (!forkServices.has(label)) throw refuse("Rejected", "that is not a fork of this sandbox");
  const service = forkServices.get(label);
  if (!service) {
    throw refuse("ServiceNotFound", `no Service in namespace ${other.namespace} selects the pods of ${label}: its fork has no Service `
      + `to take .Service.Host and .Service.Port from (give the baseline a Service, or set ${envName} otherwise)`);
  }
  if (fieldsRead(parsed.parts).has("Port") && service.port === undefined) {
    throw refuse("ServiceNotFound", `its expression reads .Service.Port, and its Service ${service.name} `
      + `(the fork of Service ${service.baselineName}) has no ports`);
  }
  return renderForkExpression(parsed.parts, { Host: service.host, Port: String(service.port ?? "") });
}

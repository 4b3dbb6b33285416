// Whether a workstation serves each local workload of a sandbox incarnation now: the tunnel
// service's locals events (one aggregate per routing key) folded into what the views and the
// Routes API read. The tunnel owns those events; this is only their consumer's view. A routing
// key is one incarnation of a sandbox: events for a key no live sandbox has are kept and never read.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export type LocalLink =
  /** `tunnel`: where the session's tunnel answers whether it is alive (empty: not checked). */
  | { kind: "connected"; sessionId: string; addresses: pb.LocalAddress[]; tunnel: string; since: string }
  | { kind: "disconnected"; sessionId: string; reason: string; since: string };

/** Local workload name → its last known link. */
export type LocalLinks = Map<string, LocalLink>;

export const noLocalLinks = (): LocalLinks => new Map();

export function foldLocalLinks(state: LocalLinks, event: DomainEvent, time: string): LocalLinks {
  switch (event.type) {
    case "ephemera.locals.connected.v1":
      return new Map(state).set(event.data.local, {
        kind: "connected", sessionId: event.data.sessionId, addresses: event.data.addresses, tunnel: event.data.tunnel, since: time,
      });
    case "ephemera.locals.disconnected.v1": {
      // A session's late word never undoes a newer session's connection.
      const now = state.get(event.data.local);
      if (now?.kind === "connected" && event.data.sessionId && now.sessionId !== event.data.sessionId) return state;
      return new Map(state).set(event.data.local, { kind: "disconnected", sessionId: event.data.sessionId, reason: event.data.reason, since: time });
    }
    default:
      return state;
  }
}

/** The local workloads a workstation serves now, by name. */
export function connectedLocals(links: LocalLinks | undefined): Set<string> {
  return new Set([...(links ?? [])].filter(([, l]) => l.kind === "connected").map(([name]) => name));
}

/** The sandbox service's reason when the tunnel of a session stopped answering its health check (locals/health.ts). */
export const TUNNEL_LOST = "tunnel-lost";

/** What a disconnect's reason means, where the bare word says too little. */
const REASONS: Record<string, string> = {
  [TUNNEL_LOST]: "tunnel lost (it stopped answering the health check)",
};

/**
 * Pure: a local workload's status and message in the sandbox view. `placement`: what the
 * runner placed for it, whose problem (nothing to route to) is told while its session serves it.
 */
export function localStatus(link: LocalLink | undefined, placement?: pb.LocalPlacement): { status: string; message: string } {
  if (!link) return { status: "Disconnected", message: "no workstation has connected (eph local connect)" };
  if (link.kind === "connected") {
    const served = `served by tunnel session ${link.sessionId} since ${link.since}`;
    const problem = placement?.sessionId === link.sessionId ? placement.problem : "";
    return { status: "Connected", message: problem ? `${served}, but ${problem}` : served };
  }
  const reason = REASONS[link.reason] ?? (link.reason || "disconnected");
  return { status: "Disconnected", message: `${reason} since ${link.since} (session ${link.sessionId})` };
}

// The health check of the tunnel, from the cluster's side: every interval, each local a
// workstation serves (as the locals projection says) has its tunnel asked whether the session
// is still open. A tunnel that died without a word (kill -9, an evicted pod) never writes
// `disconnected`; after two failed checks in a row this writes it, with reason "tunnel-lost",
// so the Routes API drops the rule and the runner the Services. Only while the local is still
// connected with that session (a reconnect racing it stays), and once: the append expects the
// version it decided on, so of several replicas one writes it.
import { encode, ev } from "@ephemera/events";
import { execute, type EventStore, type Projection } from "@ephemera/eventstore";
import { errorMessage, type Logger } from "@ephemera/kit";
import { TUNNEL_LOST, type LocalLinks } from "../sandbox/locals.js";
import { askTunnel, type AskTunnel } from "./probe.js";
import { judge, type Checked, type Strikes } from "./strikes.js";

export interface TunnelCheckOptions {
  /** EPHEMERA_LOCALS_CHECK: how often (5 s). */
  intervalMs: number;
  /** How long a tunnel may take to answer (2 s). */
  timeoutMs: number;
  /** Failed checks in a row that make a tunnel lost (2). */
  strikes?: number;
}

export const DEFAULT_TUNNEL_CHECK: TunnelCheckOptions = { intervalMs: 5_000, timeoutMs: 2_000, strikes: 2 };

export interface TunnelCheckDeps {
  store: EventStore;
  locals: Projection<LocalLinks>;
  /** The sandboxes alive now (not deleted), each with its routing key. */
  sandboxes: () => Iterable<{ name: string; routingKey: string }>;
  logger: Logger;
  ask?: AskTunnel;
}

interface Link { sandbox: string; routingKey: string; local: string; sessionId: string; tunnel: string }

export class TunnelCheck {
  private strikes: Strikes = new Map();
  private timer?: NodeJS.Timeout;
  private round?: Promise<void>;
  private readonly ask: AskTunnel;

  constructor(private readonly deps: TunnelCheckDeps, private readonly options: TunnelCheckOptions = DEFAULT_TUNNEL_CHECK) {
    this.ask = deps.ask ?? askTunnel;
  }

  /** Checks on a fixed beat (a slow round never delays the next beyond its timeout), skipping a beat while one runs. */
  start(): void {
    this.timer = setInterval(() => {
      this.round ??= this.check().catch((err: unknown) => {
        this.deps.logger.warn({ err: errorMessage(err) }, "tunnel health check: a round failed; next round as usual");
      }).finally(() => { this.round = undefined; });
    }, this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.round;
  }

  /** One round: ask each tunnel about its sessions, count the failures, disconnect the lost. */
  async check(): Promise<void> {
    const byTunnel = new Map<string, Link[]>();
    for (const link of this.connectedLinks()) byTunnel.set(link.tunnel, [...(byTunnel.get(link.tunnel) ?? []), link]);
    const round: Array<Checked & Link> = [];
    await Promise.all([...byTunnel].map(async ([tunnel, links]) => {
      const sessions = [...new Set(links.map((l) => l.sessionId))];
      const answers = await this.ask(tunnel, sessions, this.options.timeoutMs).catch(() => new Map<string, never>());
      for (const link of links) round.push({ ...link, answer: answers.get(link.sessionId) ?? "unreachable" });
    }));
    const { strikes, lost } = judge(this.strikes, round, this.options.strikes ?? 2);
    this.strikes = strikes;
    for (const failed of round.filter((c) => c.answer !== "open" && !lost.includes(c))) {
      this.deps.logger.info({ sandbox: failed.sandbox, local: failed.local, sessionId: failed.sessionId, tunnel: failed.tunnel, answer: failed.answer },
        "tunnel health check failed once; asking again next round");
    }
    for (const link of lost as Array<Checked & Link>) await this.disconnect(link);
  }

  /** Each local a workstation serves now, of a live sandbox, whose tunnel said where to ask it. */
  private *connectedLinks(): Iterable<Link> {
    for (const { name, routingKey } of this.deps.sandboxes()) {
      for (const [local, link] of this.deps.locals.get(routingKey)?.state ?? []) {
        if (link.kind === "connected" && link.tunnel) yield { sandbox: name, routingKey, local, sessionId: link.sessionId, tunnel: link.tunnel };
      }
    }
  }

  private async disconnect(link: Checked & Link): Promise<void> {
    try {
      const { appended } = await execute(this.deps.store, this.deps.locals, link.routingKey, (state) => {
        const now = state.get(link.local);
        if (now?.kind !== "connected" || now.sessionId !== link.sessionId) return [];
        return [encode(ev("ephemera.locals.disconnected.v1", {
          sandbox: link.sandbox, routingKey: link.routingKey, local: link.local, sessionId: link.sessionId, reason: TUNNEL_LOST,
        }))];
      }, { source: "sandbox", command: `${TUNNEL_LOST}:${link.local}:${link.sessionId}` });
      if (appended) {
        this.deps.logger.warn({ sandbox: link.sandbox, local: link.local, sessionId: link.sessionId, tunnel: link.tunnel, answer: link.answer },
          "tunnel lost: the local workload is disconnected (its rule and Services go)");
      }
    } catch (err) {
      this.deps.logger.warn({ err: errorMessage(err), sandbox: link.sandbox, local: link.local }, "tunnel lost, but its disconnect was not written; next round tries again");
    }
  }
}

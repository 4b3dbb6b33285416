// Follows the Routes API's WatchWorkloadRoutingRules for the router's baseline workload into
// its RoutingTable. The watch is long-lived: when it is cut (the route server restarts, the
// network drops, it refuses the token) it is asked again with backoff, and until a new
// snapshot is synced the table keeps serving the last one.
import { channelCredentials, errorMessage, grpc, type ClientTls } from "@ephemera/kit/client";
import type { Logger } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import type { Workload } from "../config.js";
import type { RoutingTable } from "./table.js";

export interface Backoff {
  /** The first wait, doubled after each failed watch up to maxMs. */
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: Backoff = { baseMs: 250, maxMs: 10_000 };

export interface WatchOptions {
  /** host:port of the Routes API. */
  address: string;
  workload: Workload;
  table: RoutingTable;
  logger: Logger;
  /** Sent as `authorization: Bearer <token>`. */
  token?: string;
  tls?: ClientTls;
  backoff?: Backoff;
  random?: () => number;
}

export interface RulesWatch {
  /** True while a watch is open and has sent its snapshot. */
  readonly synced: boolean;
  stop(): void;
}

/**
 * Pure: the wait before attempt `failures + 1`: the doubled base up to the cap, between half
 * of it and all of it (so routers cut at once do not all come back at once).
 */
export function backoffDelay(failures: number, { baseMs, maxMs }: Backoff, random: () => number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(failures, 30));
  return Math.round(ceiling * (0.5 + random() / 2));
}

// A silent server (its node gone) is noticed by pings, not only by the next write.
const KEEPALIVE: grpc.ChannelOptions = { "grpc.keepalive_time_ms": 60_000, "grpc.keepalive_timeout_ms": 20_000 };

export function watchRoutingRules(options: WatchOptions): RulesWatch {
  const { address, workload, table, logger, token, backoff = DEFAULT_BACKOFF, random = Math.random } = options;
  const { credentials, options: channel } = channelCredentials(options.tls);
  const client = new pb.routes.RoutesClient(address, credentials, { ...channel, ...KEEPALIVE });
  const request = pb.routes.WorkloadRoutingRulesRequest.fromPartial({ baselineWorkload: workload });
  let failures = 0;
  let stopped = false;
  let synced = false;
  let call: grpc.ClientReadableStream<pb.routes.WorkloadRoutingRuleOp> | undefined;
  let retry: NodeJS.Timeout | undefined;

  const open = () => {
    const metadata = new grpc.Metadata();
    if (token) metadata.set("authorization", `Bearer ${token}`);
    table.beginSnapshot();
    const current = client.watchWorkloadRoutingRules(request, metadata);
    call = current;
    current.on("data", (op: pb.routes.WorkloadRoutingRuleOp) => {
      table.apply(op);
      if (op.op === pb.routes.WatchOp.SYNCED && !synced) {
        synced = true;
        failures = 0;
        logger.info({ routes: address, rules: table.keys.length }, "routing rules synced");
      }
    });
    const ended = (err?: grpc.ServiceError) => {
      if (stopped || call !== current) return;
      call = undefined;
      synced = false;
      const delayMs = backoffDelay(failures++, backoff, random);
      const reason = err ? `${grpc.status[err.code] ?? err.code}: ${err.details || errorMessage(err)}` : "the server ended the watch";
      logger.warn({ routes: address, reason, retryInMs: delayMs, rules: table.keys.length }, table.ready
        ? "routing rules watch cut; serving the last rules meanwhile"
        : "routing rules watch failed; not ready until the first rules arrive");
      retry = setTimeout(open, delayMs);
    };
    current.on("error", ended);
    current.on("end", () => ended());
  };

  open();
  return {
    get synced() {
      return synced;
    },
    stop() {
      stopped = true;
      clearTimeout(retry);
      call?.cancel();
      client.close();
    },
  };
}

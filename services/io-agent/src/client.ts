// The agents' side of the IOContext service: fetch a step's inputs, store its outputs, and
// read them back (the runner). Every call has a deadline and is retried while the IO
// context answers UNAVAILABLE, so an outage of its Redis does not fail the step.
import { call, channelCredentials, type ClientTls, type grpc } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { DEFAULT_RETRY, withRetries, type RetryNotice, type RetryPolicy } from "./retry.js";

export interface IOCallOptions {
  /** Deadline of one attempt. */
  timeoutMs?: number;
  /** How long to keep retrying while the IO context is unavailable; false: one attempt. */
  retry?: RetryPolicy | false;
  onRetry?: (notice: RetryNotice) => void;
  /** Stops retrying (a stopped step has no use for its outputs). */
  signal?: AbortSignal;
}

/** A client of the IO context at `address`, over TLS when `tls` is given. */
/** `interceptors`: run on every call (the runner counts its calls with them). */
export function ioContextClient(address: string, tls?: ClientTls, interceptors: grpc.Interceptor[] = []): pb.IOContextClient {
  const { credentials, options } = channelCredentials(tls);
  return new pb.IOContextClient(address, credentials, interceptors.length ? { ...options, interceptors } : options);
}

/** Runs `fn` (given each attempt's deadline) under a call's options: retried while UNAVAILABLE, or once (`retry: false`). */
export function withPolicy<T>(fn: (timeoutMs: number) => Promise<T>, options: IOCallOptions): Promise<T> {
  const { timeoutMs = 15_000, retry = DEFAULT_RETRY, onRetry, signal } = options;
  if (retry === false) return fn(timeoutMs);
  return withRetries((remainingMs) => fn(Math.min(timeoutMs, remainingMs)), retry, onRetry, signal);
}

export function fetchStepInputs(client: pb.IOContextClient, runId: string, token: string, options: IOCallOptions = {}): Promise<pb.GetStepInputsResponse> {
  return withPolicy((timeoutMs) => call(client.getStepInputs.bind(client), { runId, token }, timeoutMs), options);
}

export async function storeStepOutputs(
  client: pb.IOContextClient, runId: string, token: string, outputs: pb.OutputValue[], options: IOCallOptions = {},
): Promise<void> {
  await withPolicy((timeoutMs) => call(client.putStepOutputs.bind(client), { runId, token, outputs }, timeoutMs), options);
}

export async function fetchStepOutputs(client: pb.IOContextClient, runId: string, token: string, options: IOCallOptions = {}): Promise<pb.OutputValue[]> {
  return (await withPolicy((timeoutMs) => call(client.getStepOutputs.bind(client), { runId, token }, timeoutMs), options)).outputs;
}

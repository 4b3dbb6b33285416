// The webhook registers itself: it writes its MutatingWebhookConfiguration (creating it, or
// replacing what is there, so a new CA made at start takes the place of the last one).
import { AdmissionregistrationV1Api, ApiException, type KubeConfig, type V1MutatingWebhookConfiguration } from "@kubernetes/client-node";
import { errorMessage, retry } from "@ephemera/kit";

/** Registering failed for good: refused (403 without the RBAC, 422 invalid), or the cluster never answered. */
export class WebhookRegistrationError extends Error {
  override readonly name = "WebhookRegistrationError";
  constructor(readonly configuration: string, message: string, options?: { cause?: unknown }) {
    super(`registering the MutatingWebhookConfiguration ${configuration} failed: ${message}`, options);
  }
}

export const isWebhookRegistrationError = (err: unknown): err is WebhookRegistrationError => err instanceof WebhookRegistrationError;

export interface RegisterOptions {
  /** Each call's deadline (default 10 s). */
  callTimeoutMs?: number;
  /** Tries while the cluster does not answer, throttles or conflicts (default 8: about 26 s of waits between them). */
  attempts?: number;
}

const statusOf = (err: unknown) => (err instanceof ApiException ? err.code : undefined);
/** Worth another try: no answer, throttled, a server error, or a write that raced another. */
const retryable = (err: unknown) => {
  const code = statusOf(err);
  return code === undefined || code === 409 || code === 429 || code >= 500;
};

function apiMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body = err.body as { message?: string } | string | undefined;
    const message = typeof body === "string" ? (JSON.parse(body) as { message?: string }).message : body?.message;
    return `${err.code}${message ? ` ${message}` : ""}`;
  }
  return errorMessage(err);
}

async function withDeadline<T>(call: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms); });
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Creates or replaces `configuration` on the cluster of `kubeconfig`; answers what the cluster stored. */
export async function registerWebhook(
  kubeconfig: KubeConfig, configuration: V1MutatingWebhookConfiguration, options: RegisterOptions = {},
): Promise<V1MutatingWebhookConfiguration> {
  const api = kubeconfig.makeApiClient(AdmissionregistrationV1Api);
  const name = configuration.metadata!.name!;
  const ms = options.callTimeoutMs ?? 10_000;
  try {
    return await retry(async () => {
      let current: V1MutatingWebhookConfiguration | undefined;
      try {
        current = await withDeadline(api.readMutatingWebhookConfiguration({ name }), ms, `get ${name}`);
      } catch (err) {
        if (statusOf(err) !== 404) throw err;
      }
      if (!current) return withDeadline(api.createMutatingWebhookConfiguration({ body: configuration }), ms, `create ${name}`);
      // Labels and annotations others put on it (kubectl apply's) stay; what the webhook owns is replaced.
      const metadata = {
        ...configuration.metadata, resourceVersion: current.metadata?.resourceVersion,
        labels: { ...current.metadata?.labels, ...configuration.metadata?.labels },
        ...(current.metadata?.annotations ? { annotations: current.metadata.annotations } : {}),
      };
      return withDeadline(api.replaceMutatingWebhookConfiguration({ name, body: { ...configuration, metadata } }), ms, `replace ${name}`);
    }, { attempts: options.attempts ?? 8, baseMs: 250, maxMs: 10_000, retryable });
  } catch (err) {
    throw new WebhookRegistrationError(name, apiMessage(err), { cause: err });
  }
}

// One webhook call: the AdmissionReview POSTed over HTTPS to `clientConfig.url` (with the
// `?timeout=` the API server adds), the certificate checked against `caBundle` (else the
// machine's roots), the answer read and checked. A failure is a CallError, worded as the
// API server words it, to which the webhook's failurePolicy applies.
import { request } from "node:https";
import type { WebhookSpec } from "./configuration.js";

export class CallError extends Error {
  override readonly name = "CallError";
  constructor(readonly webhook: string, reason: string) {
    super(`failed calling webhook "${webhook}": ${reason}`);
  }
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patchType?: string;
  patch?: string;
  status?: { code?: number; message?: string; reason?: string };
  warnings?: string[];
}

type Rec = Record<string, unknown>;
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** Node's connection and TLS errors in the words of Go's HTTP client, as the API server would report them. */
function transportError(err: NodeJS.ErrnoException & { address?: string; port?: number }, host: string): string {
  switch (err.code) {
    case "ECONNREFUSED": return `dial tcp ${err.address ?? host}:${err.port ?? ""}: connect: connection refused`;
    case "ENOTFOUND": case "EAI_AGAIN": return `dial tcp: lookup ${host}: no such host`;
    case "ECONNRESET": return "EOF";
    case "ERR_TLS_CERT_ALTNAME_INVALID": return `tls: failed to verify certificate: x509: certificate is not valid for ${host} (${err.message})`;
    case "UNABLE_TO_VERIFY_LEAF_SIGNATURE": case "UNABLE_TO_GET_ISSUER_CERT_LOCALLY": case "SELF_SIGNED_CERT_IN_CHAIN":
    case "DEPTH_ZERO_SELF_SIGNED_CERT": case "CERT_SIGNATURE_FAILURE":
      return "tls: failed to verify certificate: x509: certificate signed by unknown authority";
    case "CERT_HAS_EXPIRED": return "tls: failed to verify certificate: x509: certificate has expired or is not yet valid";
    default: return err.message;
  }
}

/** The CA bundle's PEM text, or a CallError when it holds no certificate. */
function caOf(webhook: WebhookSpec): string | undefined {
  const bundle = webhook.clientConfig.caBundle;
  if (!bundle) return undefined;
  const pem = Buffer.from(bundle, "base64").toString("utf8");
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new CallError(webhook.name, "could not get REST client: unable to load root certificates: unable to parse bytes as PEM block");
  return pem;
}

/** The URL the review goes to, or a CallError for a `service` reference kube-sim cannot reach. */
function urlOf(webhook: WebhookSpec, timeoutSeconds: number): URL {
  const { url, service } = webhook.clientConfig;
  if (!url) {
    const ref = service ? `${service.namespace}/${service.name}:${service.port ?? 443}` : "(none)";
    throw new CallError(webhook.name, `kube-sim calls webhooks by clientConfig.url only; clientConfig.service ${ref} is not resolved (register the webhook with a URL)`);
  }
  const target = new URL(url);
  target.searchParams.set("timeout", `${timeoutSeconds}s`);
  return target;
}

function checkResponse(webhook: WebhookSpec, uid: string, status: number, text: string): AdmissionResponse {
  const invalid = (why: string) => new CallError(webhook.name, `received invalid webhook response: ${why}`);
  if (status < 200 || status > 299) {
    throw new CallError(webhook.name, `failed to call webhook: the server responded with the status code ${status}: ${text.trim().slice(0, 300)}`);
  }
  let body: unknown;
  try { body = JSON.parse(text); } catch (err) { throw invalid(`the body is not JSON: ${(err as Error).message}`); }
  if (!isRecord(body) || body["apiVersion"] !== "admission.k8s.io/v1" || body["kind"] !== "AdmissionReview") {
    throw invalid("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview");
  }
  const response = body["response"];
  if (!isRecord(response)) throw invalid("response was absent");
  if (response["uid"] !== uid) throw invalid(`expected response.uid="${uid}", got "${String(response["uid"] ?? "")}"`);
  if (typeof response["allowed"] !== "boolean") throw invalid("response.allowed must be true or false");
  return response as unknown as AdmissionResponse;
}

/** POSTs `review` to the webhook, with its timeoutSeconds as the deadline. */
export function callWebhook(webhook: WebhookSpec, review: { request: { uid: string } }): Promise<AdmissionResponse> {
  return new Promise((resolve, reject) => {
    let url: URL;
    let ca: string | undefined;
    try {
      url = urlOf(webhook, webhook.timeoutSeconds);
      ca = caOf(webhook);
    } catch (err) {
      reject(err);
      return;
    }
    const post = `Post "${url.toString()}"`;
    const body = JSON.stringify(review);
    const req = request(url, {
      method: "POST", ...(ca ? { ca } : {}),
      headers: { "Content-Type": "application/json", Accept: "application/json", "Content-Length": Buffer.byteLength(body) },
    }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => { text += chunk; });
      res.on("end", () => {
        clearTimeout(deadline);
        try { resolve(checkResponse(webhook, review.request.uid, res.statusCode ?? 0, text)); } catch (err) { reject(err); }
      });
      res.on("error", (err) => { clearTimeout(deadline); reject(new CallError(webhook.name, `failed to call webhook: ${post}: ${err.message}`)); });
    });
    const deadline = setTimeout(() => req.destroy(Object.assign(new Error("context deadline exceeded"), { code: "DEADLINE" })), webhook.timeoutSeconds * 1000);
    req.on("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(deadline);
      reject(new CallError(webhook.name, `failed to call webhook: ${post}: ${transportError(err, url.hostname)}`));
    });
    req.end(body);
  });
}

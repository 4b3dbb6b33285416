// The MutatingWebhookConfiguration that sends pod creates to the webhook: every pod of the
// namespaces not opted out (a selector cannot read annotations, so the webhook decides by
// them), failing open so an outage of the webhook never blocks a user's pods. Pure: the
// registration writes it, deploy/ ships the same object (a test compares them).
import type { V1MutatingWebhookConfiguration, AdmissionregistrationV1WebhookClientConfig } from "@kubernetes/client-node";
import { MUTATE_PATH } from "../server/paths.js";

export const CONFIGURATION_NAME = "ephemera-router-injector";
export const WEBHOOK_NAME = "inject.router.ephemera.dev";
/** On a namespace or a pod, `ephemera.dev/injection: disabled` keeps the webhook away. */
export const INJECTION_LABEL = "ephemera.dev/injection";
/** The API server gives up after this long and, failing open, creates the pod as it was. */
export const TIMEOUT_SECONDS = 3;

/** Where the API server reaches the webhook: a URL, or a Service of the cluster. */
export type WebhookTarget = { url: string } | { service: { namespace: string; name: string; port: number } };

export interface ConfigurationOptions {
  target: WebhookTarget;
  /** PEM of the CA that signed the serving certificate; absent, the API server's own trust roots. */
  caBundle?: string;
  /** Namespaces never injected besides kube-system: ephemera's own. */
  excludeNamespaces: string[];
}

export function clientConfig(target: WebhookTarget, caBundle?: string): AdmissionregistrationV1WebhookClientConfig {
  return {
    ...("url" in target ? { url: target.url } : { service: { ...target.service, path: MUTATE_PATH } }),
    ...(caBundle ? { caBundle: Buffer.from(caBundle).toString("base64") } : {}),
  };
}

export function webhookConfiguration(options: ConfigurationOptions): V1MutatingWebhookConfiguration {
  const excluded = [...new Set(["kube-system", ...options.excludeNamespaces])];
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: { name: CONFIGURATION_NAME, labels: { "app.kubernetes.io/name": "webhook", "app.kubernetes.io/part-of": "ephemera" } },
    webhooks: [{
      name: WEBHOOK_NAME,
      clientConfig: clientConfig(options.target, options.caBundle),
      rules: [{ operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], scope: "Namespaced" }],
      failurePolicy: "Ignore",
      sideEffects: "None",
      admissionReviewVersions: ["v1"],
      timeoutSeconds: TIMEOUT_SECONDS,
      matchPolicy: "Equivalent",
      reinvocationPolicy: "Never",
      namespaceSelector: {
        matchExpressions: [
          { key: INJECTION_LABEL, operator: "NotIn", values: ["disabled"] },
          { key: "kubernetes.io/metadata.name", operator: "NotIn", values: excluded },
        ],
      },
      objectSelector: { matchExpressions: [{ key: INJECTION_LABEL, operator: "NotIn", values: ["disabled"] }] },
    }],
  };
}

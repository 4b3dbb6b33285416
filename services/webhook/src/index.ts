// The router injector: the pod mutation (pure), the admission webhook serving it, its
// registration with a cluster, and the same patch for manifests applied with kubectl.
export { injectRouter, type AddOperation, type InjectOptions } from "./inject/inject.js";
export { asksForRouter, decide, isInjected, portMappings, type Decision, type PortMapping } from "./inject/decide.js";
export { ROUTED_KINDS, workloadOf } from "./inject/workload.js";
export * from "./inject/pod.js";
export { answerReview, isMalformedReviewError, MalformedReviewError, ADMISSION_API_VERSION, type ReviewAnswer } from "./server/review.js";
export { startWebhookServer, type WebhookServer, type WebhookServerOptions } from "./server/server.js";
export { HEALTH_PATH, MUTATE_PATH } from "./server/paths.js";
export { makeCerts, type WebhookCerts } from "./certs/certs.js";
export {
  CONFIGURATION_NAME, INJECTION_LABEL, TIMEOUT_SECONDS, WEBHOOK_NAME, clientConfig, webhookConfiguration, type ConfigurationOptions, type WebhookTarget,
} from "./register/configuration.js";
export { isWebhookRegistrationError, registerWebhook, WebhookRegistrationError, type RegisterOptions } from "./register/register.js";
export { DEFAULT_OWN_NAMESPACE, DEFAULT_ROUTER_IMAGE, DEFAULT_ROUTES, DEFAULT_WEBHOOK_LISTEN, webhookConfig, type WebhookConfig } from "./config.js";
export { startWebhook, type RunningWebhook } from "./start.js";
export { checkWebhookHealth } from "./server/health.js";
export { ManifestError, patchManifests, type PatchOptions, type PatchResult } from "./patch/manifests.js";
export { WebhookMetrics, type ReviewOutcome } from "./server/metrics.js";

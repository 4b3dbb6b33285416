// MutatingWebhookConfiguration as the real API server keeps it: its defaults on create
// (failurePolicy Fail, timeoutSeconds 10, empty selectors, rule scope `*`, service port
// 443) and the validation clients meet, with its messages. Pure.
import type { FieldError } from "../status.js";
import type { Obj } from "../store.js";

type Rec = Record<string, unknown>;
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

export interface LabelSelectorSpec {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

export interface RuleSpec {
  operations?: string[];
  apiGroups?: string[];
  apiVersions?: string[];
  resources?: string[];
  scope?: string;
}

export interface WebhookSpec {
  name: string;
  clientConfig: { url?: string; service?: { namespace: string; name: string; port?: number; path?: string }; caBundle?: string };
  rules?: RuleSpec[];
  failurePolicy: "Ignore" | "Fail";
  sideEffects?: string;
  admissionReviewVersions?: string[];
  timeoutSeconds: number;
  namespaceSelector: LabelSelectorSpec;
  objectSelector: LabelSelectorSpec;
}

export function webhookConfigurationDefaults(obj: Obj): Obj {
  const webhooks = Array.isArray(obj["webhooks"]) ? (obj["webhooks"] as unknown[]) : [];
  return {
    ...obj,
    webhooks: webhooks.map((w) => {
      if (!isRecord(w)) return w;
      const client = isRecord(w["clientConfig"]) ? w["clientConfig"] : {};
      const service = isRecord(client["service"]) ? { ...client["service"], port: client["service"]["port"] ?? 443 } : undefined;
      return {
        failurePolicy: "Fail", matchPolicy: "Equivalent", namespaceSelector: {}, objectSelector: {}, timeoutSeconds: 10, reinvocationPolicy: "Never",
        ...w,
        clientConfig: { ...client, ...(service ? { service } : {}) },
        rules: (Array.isArray(w["rules"]) ? w["rules"] : []).map((r: unknown) => (isRecord(r) ? { scope: "*", ...r } : r)),
      };
    }),
  };
}

const OPERATIONS = ["*", "CREATE", "UPDATE", "DELETE", "CONNECT"];
const oneOf = (values: string[]) => `supported values: ${values.map((v) => `"${v}"`).join(", ")}`;
const QUALIFIED = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function urlErrors(field: string, text: string): FieldError[] {
  const bad = (detail: string): FieldError[] => [{ type: "Invalid", field, value: text, detail }];
  let url: URL;
  try { url = new URL(text); } catch { return bad("host must be specified"); }
  if (url.protocol !== "https:") return bad("'https' is the only allowed URL scheme");
  if (!url.hostname) return bad("host must be specified");
  if (url.username || url.password) return bad("user information is not permitted in the URL");
  if (url.hash || text.includes("#")) return bad("fragments are not permitted in the URL");
  if (url.search || text.includes("?")) return bad("query parameters are not permitted in the URL");
  return [];
}

function webhookErrors(w: unknown, at: string): FieldError[] {
  if (!isRecord(w)) return [{ type: "Invalid", field: at, detail: "must be an object" }];
  const errs: FieldError[] = [];
  const name = typeof w["name"] === "string" ? w["name"] : "";
  if (!name) errs.push({ type: "Required", field: `${at}.name`, detail: "" });
  else if (name.split(".").length < 3 || !QUALIFIED.test(name)) {
    errs.push({ type: "Invalid", field: `${at}.name`, value: name, detail: "should be a domain with at least three segments separated by dots" });
  }
  const client = isRecord(w["clientConfig"]) ? w["clientConfig"] : {};
  const hasUrl = typeof client["url"] === "string" && client["url"] !== "";
  const service = isRecord(client["service"]) ? client["service"] : undefined;
  if (hasUrl === !!service) errs.push({ type: "Required", field: `${at}.clientConfig`, detail: "exactly one of url or service is required" });
  if (hasUrl) errs.push(...urlErrors(`${at}.clientConfig.url`, client["url"] as string));
  if (service) {
    for (const f of ["namespace", "name"]) if (!service[f]) errs.push({ type: "Required", field: `${at}.clientConfig.service.${f}`, detail: `service ${f} is required` });
    const port = Number(service["port"] ?? 443);
    if (!Number.isInteger(port) || port < 1 || port > 65535) errs.push({ type: "Invalid", field: `${at}.clientConfig.service.port`, value: port, detail: "port is not valid: must be between 1 and 65535, inclusive" });
    if (service["path"] !== undefined && !String(service["path"]).startsWith("/")) errs.push({ type: "Invalid", field: `${at}.clientConfig.service.path`, value: String(service["path"]), detail: "must start with a '/'" });
  }
  const sideEffects = w["sideEffects"];
  if (sideEffects === undefined) errs.push({ type: "Required", field: `${at}.sideEffects`, detail: oneOf(["None", "NoneOnDryRun"]) });
  else if (sideEffects !== "None" && sideEffects !== "NoneOnDryRun") errs.push({ type: "Invalid", field: `${at}.sideEffects`, value: String(sideEffects), detail: oneOf(["None", "NoneOnDryRun"]) });
  const versions = Array.isArray(w["admissionReviewVersions"]) ? (w["admissionReviewVersions"] as unknown[]) : [];
  if (!versions.length) errs.push({ type: "Required", field: `${at}.admissionReviewVersions`, detail: "must specify one of v1, v1beta1" });
  // kube-sim speaks AdmissionReview v1 only (as a server would that no longer serves v1beta1).
  else if (!versions.includes("v1")) errs.push({ type: "Invalid", field: `${at}.admissionReviewVersions`, value: versions.join(","), detail: "must include v1: kube-sim sends AdmissionReview v1 only" });
  const enumError = (field: string, values: string[]) => {
    if (w[field] !== undefined && !values.includes(String(w[field]))) errs.push({ type: "Invalid", field: `${at}.${field}`, value: String(w[field]), detail: oneOf(values) });
  };
  enumError("failurePolicy", ["Fail", "Ignore"]);
  enumError("matchPolicy", ["Equivalent", "Exact"]);
  enumError("reinvocationPolicy", ["IfNeeded", "Never"]);
  const timeout = w["timeoutSeconds"];
  if (timeout !== undefined && (!Number.isInteger(timeout) || (timeout as number) < 1 || (timeout as number) > 30)) {
    errs.push({ type: "Invalid", field: `${at}.timeoutSeconds`, value: Number(timeout), detail: "the timeout value must be between 1 and 30 seconds" });
  }
  (Array.isArray(w["rules"]) ? (w["rules"] as unknown[]) : []).forEach((r, j) => {
    const rule = (isRecord(r) ? r : {}) as RuleSpec;
    for (const op of rule.operations ?? []) if (!OPERATIONS.includes(op)) errs.push({ type: "Invalid", field: `${at}.rules[${j}].operations`, value: op, detail: oneOf(OPERATIONS) });
    for (const f of ["operations", "apiGroups", "apiVersions", "resources"] as const) {
      if (!rule[f]?.length) errs.push({ type: "Required", field: `${at}.rules[${j}].${f}`, detail: "" });
    }
    if (rule.scope !== undefined && !["*", "Cluster", "Namespaced"].includes(rule.scope)) errs.push({ type: "Invalid", field: `${at}.rules[${j}].scope`, value: rule.scope, detail: oneOf(["*", "Cluster", "Namespaced"]) });
  });
  return errs;
}

/** What a MutatingWebhookConfiguration (defaults applied) breaks. */
export function validateWebhookConfiguration(obj: Obj): FieldError[] {
  const webhooks = obj["webhooks"];
  if (webhooks !== undefined && !Array.isArray(webhooks)) return [{ type: "Invalid", field: "webhooks", detail: "must be a list" }];
  const list = (webhooks ?? []) as unknown[];
  const errs = list.flatMap((w, i) => webhookErrors(w, `webhooks[${i}]`));
  const names = list.map((w) => (isRecord(w) ? w["name"] : undefined));
  names.forEach((n, i) => {
    if (n && names.indexOf(n) !== i) errs.push({ type: "Invalid", field: `webhooks[${i}].name`, value: String(n), detail: "Duplicate value: the names of a configuration's webhooks must be unique" });
  });
  return errs;
}

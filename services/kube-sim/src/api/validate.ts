// The real API server's validation that clients meet most often, with its messages: names
// per kind, labels and annotations, the 1 MiB of a Secret or ConfigMap, an immutable
// Secret or ConfigMap, and the pod spec fields an update may change. Pure: each check
// answers the rules broken, as Kubernetes' field.ErrorList, for one 422.
import { isDeepStrictEqual } from "node:util";
import type { ResourceType } from "../resources.js";
import type { FieldError } from "../status.js";
import type { Obj } from "../store.js";
import { validateWebhookConfiguration } from "../admission/configuration.js";

type Rec = Record<string, unknown>;

/** `msg (e.g. 'a',  or 'b', regex used for validation is 'fmt')`, as validation.RegexError words it. */
function regexError(msg: string, fmt: string, ...examples: string[]): string {
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(" or ")}regex used for validation is '${fmt}')`;
}
const maxLenError = (n: number) => `must be no more than ${n} characters`;

const LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FMT = `${LABEL_FMT}(\\.${LABEL_FMT})*`;
const DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT = `(${QUALIFIED_FMT})?`;
const full = (fmt: string) => new RegExp(`^${fmt}$`);

/** IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label: the messages of the rules `value` breaks. */
export function dns1123Label(value: string): string[] {
  const errs = value.length > 63 ? [maxLenError(63)] : [];
  if (!full(LABEL_FMT).test(value)) {
    errs.push(regexError("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character", LABEL_FMT, "my-name", "123-abc"));
  }
  return errs;
}

export function dns1123Subdomain(value: string): string[] {
  const errs = value.length > 253 ? [maxLenError(253)] : [];
  if (!full(SUBDOMAIN_FMT).test(value)) {
    errs.push(regexError("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character", SUBDOMAIN_FMT, "example.com"));
  }
  return errs;
}

export function dns1035Label(value: string): string[] {
  const errs = value.length > 63 ? [maxLenError(63)] : [];
  if (!full(DNS1035_FMT).test(value)) {
    errs.push(regexError("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character", DNS1035_FMT, "my-name", "abc-123"));
  }
  return errs;
}

/** RBAC names are path segments: anything but `.`, `..` and names with `/` or `%`. */
function pathSegmentName(value: string): string[] {
  if (value === "." || value === "..") return [`may not be '${value}'`];
  return ["/", "%"].filter((c) => value.includes(c)).map((c) => `may not contain '${c}'`);
}

/** Each kind's name rule, as its validation in the real server picks it. */
function nameRule(t: ResourceType): (name: string) => string[] {
  if (t.group === "" && t.kind === "Namespace") return dns1123Label;
  if (t.group === "" && t.kind === "Service") return dns1035Label;
  if (t.group === "rbac.authorization.k8s.io") return pathSegmentName;
  if (t.group === "batch" && t.kind === "CronJob") {
    // Its jobs are named NAME-<minutes since the epoch>, which must fit a label.
    return (name) => [...dns1123Subdomain(name), ...(name.length > 52 ? [maxLenError(52)] : [])];
  }
  return dns1123Subdomain;
}

function qualifiedName(value: string): string[] {
  const parts = value.split("/");
  const nameMsg = regexError("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", QUALIFIED_FMT, "MyName", "my.name", "123-abc");
  if (parts.length > 2) return [`a qualified name ${nameMsg} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`];
  const errs: string[] = [];
  const name = parts.length === 2 ? parts[1]! : parts[0]!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (!prefix) errs.push("prefix part must be non-empty");
    else errs.push(...dns1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  }
  if (!name) errs.push("name part must be non-empty");
  else if (name.length > 63) errs.push(`name part ${maxLenError(63)}`);
  if (!full(QUALIFIED_FMT).test(name)) errs.push(`name part ${nameMsg}`);
  return errs;
}

function labelValue(value: string): string[] {
  const errs = value.length > 63 ? [maxLenError(63)] : [];
  if (!full(LABEL_VALUE_FMT).test(value)) {
    errs.push(regexError("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", LABEL_VALUE_FMT, "MyValue", "my_value", "12345"));
  }
  return errs;
}

const TOTAL_ANNOTATION_SIZE = 256 * 1024;
/** core.MaxSecretSize, the limit of a Secret's and a ConfigMap's data. */
export const MAX_SECRET_SIZE = 1024 * 1024;

const invalid = (field: string, value: string, details: string[]): FieldError[] => details.map((detail) => ({ type: "Invalid", field, value, detail }));

/** ValidateObjectMeta's checks of the name, labels and annotations. */
function objectMeta(t: ResourceType, meta: Rec): FieldError[] {
  const name = String(meta["name"] ?? "");
  const errs = invalid("metadata.name", name, nameRule(t)(name));
  for (const [k, v] of Object.entries((meta["labels"] ?? {}) as Record<string, string>)) {
    errs.push(...invalid("metadata.labels", k, qualifiedName(k)), ...invalid("metadata.labels", String(v), labelValue(String(v))));
  }
  let size = 0;
  for (const [k, v] of Object.entries((meta["annotations"] ?? {}) as Record<string, string>)) {
    errs.push(...invalid("metadata.annotations", k, qualifiedName(k.toLowerCase())));
    size += Buffer.byteLength(k) + Buffer.byteLength(String(v));
  }
  if (size > TOTAL_ANNOTATION_SIZE) errs.push({ type: "TooLong", field: "metadata.annotations", detail: `must have at most ${TOTAL_ANNOTATION_SIZE} bytes` });
  return errs;
}

const sizeOf = (values: unknown, base64: boolean) =>
  Object.values((values ?? {}) as Record<string, string>).reduce((n, v) => n + Buffer.byteLength(String(v), base64 ? "base64" : "utf8"), 0);

/** What a create or an update of `obj` breaks (the object as it will be stored, defaults applied). */
export function validateObject(t: ResourceType, obj: Obj): FieldError[] {
  const errs = objectMeta(t, obj.metadata);
  if (t.group === "admissionregistration.k8s.io") return [...errs, ...validateWebhookConfiguration(obj)];
  if (t.group !== "") return errs;
  const tooLong = (field: string): FieldError => ({ type: "TooLong", field, detail: `must have at most ${MAX_SECRET_SIZE} bytes` });
  if (t.kind === "Secret" && sizeOf(obj["data"], true) > MAX_SECRET_SIZE) errs.push(tooLong("data"));
  // The real server names no field for a ConfigMap: its path is the root, printed `[]`.
  if (t.kind === "ConfigMap" && sizeOf(obj["data"], false) + sizeOf(obj["binaryData"], true) > MAX_SECRET_SIZE) errs.push(tooLong("[]"));
  return errs;
}

const IMMUTABLE_SET = "field is immutable when `immutable` is set";

/** ValidateSecretUpdate, ValidateConfigMapUpdate and ValidatePodUpdate: what an update may not change. */
export function validateUpdate(t: ResourceType, current: Obj, next: Obj): FieldError[] {
  if (t.group !== "") return [];
  switch (t.kind) {
    case "Secret":
    case "ConfigMap": {
      const errs: FieldError[] = [];
      if (t.kind === "Secret" && (next["type"] ?? "Opaque") !== (current["type"] ?? "Opaque")) {
        errs.push({ type: "Invalid", field: "type", value: String(next["type"] ?? ""), detail: "field is immutable" });
      }
      if (current["immutable"] !== true) return errs;
      if (next["immutable"] !== true) errs.push({ type: "Forbidden", field: "immutable", detail: IMMUTABLE_SET });
      for (const field of t.kind === "Secret" ? ["data"] : ["data", "binaryData"]) {
        if (!isDeepStrictEqual(next[field] ?? {}, current[field] ?? {})) errs.push({ type: "Forbidden", field, detail: IMMUTABLE_SET });
      }
      return errs;
    }
    case "Pod": return podUpdate((current["spec"] ?? {}) as Rec, (next["spec"] ?? {}) as Rec);
    default: return [];
  }
}

const POD_UPDATE_FORBIDDEN = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
  + "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
  + "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/** The new spec, with what may change taken back from the old one, must equal the old spec. */
function podUpdate(old: Rec, next: Rec): FieldError[] {
  const errs: FieldError[] = [];
  const oldDeadline = old["activeDeadlineSeconds"] as number | undefined;
  const newDeadline = next["activeDeadlineSeconds"] as number | undefined;
  if (oldDeadline !== undefined && newDeadline === undefined) {
    errs.push({ type: "Invalid", field: "spec.activeDeadlineSeconds", value: "null", detail: "must not update from a positive integer to nil value" });
  } else if (oldDeadline !== undefined && newDeadline !== undefined && newDeadline > oldDeadline) {
    errs.push({ type: "Invalid", field: "spec.activeDeadlineSeconds", value: newDeadline, detail: "must be less than or equal to previous value" });
  }
  const newTolerations = (next["tolerations"] ?? []) as unknown[];
  ((old["tolerations"] ?? []) as unknown[]).forEach((o, i) => {
    if (!newTolerations.some((n) => isDeepStrictEqual(n, o))) {
      errs.push({ type: "Forbidden", field: `spec.tolerations[${i}]`, detail: "existing toleration can not be modified except its tolerationSeconds" });
    }
  });
  const munged: Rec = { ...next };
  for (const list of ["containers", "initContainers"]) {
    const before = (old[list] ?? []) as Rec[];
    if (Array.isArray(next[list])) munged[list] = (next[list] as Rec[]).map((c, i) => (before[i] ? { ...c, image: before[i]["image"] } : c));
  }
  for (const field of ["activeDeadlineSeconds", "tolerations"]) {
    if (old[field] === undefined) delete munged[field];
    else munged[field] = old[field];
  }
  const oldGrace = old["terminationGracePeriodSeconds"] as number | undefined;
  if (oldGrace !== undefined && oldGrace < 0 && next["terminationGracePeriodSeconds"] === 1) munged["terminationGracePeriodSeconds"] = oldGrace;
  if (!isDeepStrictEqual(munged, old)) errs.push({ type: "Forbidden", field: "spec", detail: POD_UPDATE_FORBIDDEN });
  return errs;
}

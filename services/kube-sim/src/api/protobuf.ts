// Reads the protobuf bodies kubectl ≥ 1.32 sends for built-in kinds (`kubectl create
// namespace|secret|configmap|deployment|…`): the 4-byte magic `k8s\0`, then a
// runtime.Unknown whose typeMeta names the kind and whose `raw` is the object. The object
// becomes the JSON a Go server would print for it, using the descriptors kubectl itself
// carries (src/gen, see scripts/gen-descriptors.mjs).
import { createFileRegistry, fromBinary, isFieldSet, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { k8sDescriptorSetBase64 } from "../gen/k8s-descriptors.js";
import type { Json } from "../patch.js";
import { badRequest } from "../status.js";

export const PROTOBUF = "application/vnd.kubernetes.protobuf";
const MAGIC = Buffer.from("k8s\0", "latin1");
const META = "k8s.io.apimachinery.pkg.apis.meta.v1";

let registry: ReturnType<typeof createFileRegistry> | undefined;
// Built on first use: most kube-sim runs never see a protobuf body.
const types = () => (registry ??= createFileRegistry(fromBinary(FileDescriptorSetSchema, Buffer.from(k8sDescriptorSetBase64, "base64"))));

/** The message type of `kind` in `apiVersion` (`apps/v1` Deployment → k8s.io.api.apps.v1.Deployment). */
function messageOf(apiVersion: string, kind: string): DescMessage | undefined {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") as [string, string] : ["", apiVersion];
  // The package is the group's first label: rbac.authorization.k8s.io → rbac, "" → core.
  const pkg = `k8s.io.api.${group.split(".")[0] || "core"}.${version}`;
  return types().getMessage(`${pkg}.${kind}`) ?? types().getMessage(`${META}.${kind}`);
}

/** The JSON object of a protobuf body; a body that is not one is a 400, as on a real server. */
export function decodeProtobuf(body: Buffer): Json {
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw badRequest("provided object is not a valid Kubernetes protobuf message: missing the k8s\\0 prefix");
  }
  let unknown: Message & { typeMeta?: { apiVersion: string; kind: string }; raw: Uint8Array };
  try {
    unknown = fromBinary(types().getMessage("k8s.io.apimachinery.pkg.runtime.Unknown")!, body.subarray(MAGIC.length)) as typeof unknown;
  } catch (err) {
    throw badRequest(`the body of the request could not be decoded as protobuf: ${(err as Error).message}`);
  }
  const { apiVersion = "", kind = "" } = unknown.typeMeta ?? {};
  const desc = messageOf(apiVersion, kind);
  if (!desc) throw badRequest(`no kind "${kind}" is registered for version "${apiVersion}"`);
  let object: Message;
  try {
    object = fromBinary(desc, unknown.raw);
  } catch (err) {
    throw badRequest(`the body of the request could not be decoded as ${kind}: ${(err as Error).message}`);
  }
  return { apiVersion, kind, ...(toJson(desc, object) as { [k: string]: Json }) };
}

// gogoproto.nullable = false (extension 65001): the Go field is a value, not a pointer, so
// protobuf always carries it; its zero value is what Go's omitempty leaves out of the JSON.
const NULLABLE_EXT = 65001;
function nullable(field: DescField): boolean {
  const ext = field.proto.options?.$unknown?.find((u) => u.no === NULLABLE_EXT);
  return !ext || ext.data[0] !== 0;
}

const isZero = (v: unknown) => v === "" || v === 0 || v === false || v === 0n;

function toJson(desc: DescMessage, msg: Message): Json {
  const special = wellKnown(desc.typeName, msg);
  if (special !== undefined) return special;
  const out: { [k: string]: Json } = {};
  for (const field of desc.fields) {
    if (!isFieldSet(msg, field)) continue;
    const value = (msg as unknown as Record<string, unknown>)[field.localName];
    const json = fieldJson(field, value);
    if (json === undefined) continue;
    if (field.fieldKind === "scalar" && !nullable(field) && isZero(value)) continue;
    out[field.name] = json;
  }
  return out;
}

function fieldJson(field: DescField, value: unknown): Json | undefined {
  switch (field.fieldKind) {
    case "scalar": return scalar(value);
    case "enum": return value as number;
    case "message": return toJson(field.message, value as Message) ?? undefined;
    case "list":
      return (value as unknown[]).map((v) => (field.listKind === "message" ? toJson(field.message!, v as Message) : scalar(v)));
    case "map": {
      const out: { [k: string]: Json } = {};
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        out[k] = field.mapKind === "message" ? toJson(field.message!, v as Message) : scalar(v);
      }
      return out;
    }
  }
}

function scalar(v: unknown): Json {
  if (typeof v === "bigint") return Number(v);
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  return v as Json;
}

/** The types whose JSON is not their protobuf shape (they marshal themselves in Go). */
function wellKnown(typeName: string, msg: Message): Json | undefined {
  const m = msg as unknown as Record<string, unknown>;
  switch (typeName) {
    case `${META}.Time`:
    case `${META}.MicroTime`: {
      const seconds = Number(m["seconds"] ?? 0n);
      const nanos = Number(m["nanos"] ?? 0);
      if (!seconds && !nanos) return null;
      const base = new Date(seconds * 1000).toISOString().slice(0, 19);
      return typeName.endsWith(".Time") ? `${base}Z` : `${base}.${String(Math.floor(nanos / 1000)).padStart(6, "0")}Z`;
    }
    case `${META}.Duration`: return `${Number(m["duration"] ?? 0n) / 1e9}s`;
    case "k8s.io.apimachinery.pkg.api.resource.Quantity": return m["string"] as string;
    case "k8s.io.apimachinery.pkg.util.intstr.IntOrString": return Number(m["type"] ?? 0n) === 1 ? (m["strVal"] as string) : (m["intVal"] as number);
    case `${META}.FieldsV1`:
    case "k8s.io.apimachinery.pkg.runtime.RawExtension": {
      const raw = (m["Raw"] ?? m["raw"]) as Uint8Array | undefined;
      return raw?.length ? (JSON.parse(Buffer.from(raw).toString("utf8")) as Json) : null;
    }
    case `${META}.Verbs`: return m["items"] as string[];
    default: return undefined;
  }
}

// Every string field of a request, checked as UTF-8 on the wire bytes before the generated
// code decodes them (which would replace a bad byte with U+FFFD and go on): the request's
// descriptor says which fields are strings, and the walk knows their paths as JSON names.
import { createFileRegistry, fromBinary, ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { fieldPath, type FieldViolation, type Path } from "./errors.js";
import { firstInvalidUtf8 } from "./utf8.js";

/** The request type of every method in a descriptor set, by gRPC path (`/package.Service/Method`). */
export function requestTypes(descriptorSet: Uint8Array): Map<string, DescMessage> {
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet));
  const types = new Map<string, DescMessage>();
  for (const file of registry.files) {
    for (const service of file.services) {
      for (const method of service.methods) types.set(`/${service.typeName}/${method.name}`, method.input);
    }
  }
  return types;
}

/** A violation (rule `utf8`) for each string field of `bytes` (a `type` message) that is not UTF-8, at its first bad byte. */
export function invalidStrings(bytes: Uint8Array, type: DescMessage): FieldViolation[] {
  const out: FieldViolation[] = [];
  walk(new BinaryReader(bytes), bytes.length, type, [], out);
  return out;
}

function walk(reader: BinaryReader, end: number, type: DescMessage, at: Path, out: FieldViolation[]): void {
  const seen = new Map<number, number>();
  while (reader.pos < end) {
    const [number, wireType] = reader.tag();
    const field = type.fields.find((f) => f.number === number);
    // Numbers (packed or not), enums, bytes and unknown fields hold no text.
    if (!field || wireType !== WireType.LengthDelimited || !holdsText(field)) {
      reader.skip(wireType, number);
      continue;
    }
    const index = seen.get(number) ?? 0;
    seen.set(number, index + 1);
    const here = field.fieldKind === "list" ? [...at, field.jsonName, index] : [...at, field.jsonName];
    if (field.fieldKind === "map") entry(reader.bytes(), field, here, out);
    else if (field.message) {
      const length = reader.uint32();
      walk(reader, reader.pos + length, field.message, here, out);
    } else check(reader.bytes(), here, "the value", out);
  }
}

function holdsText(field: DescField): boolean {
  switch (field.fieldKind) {
    case "scalar": return field.scalar === ScalarType.STRING;
    case "list": return field.listKind === "message" || field.scalar === ScalarType.STRING;
    case "map":
      return field.mapKey === ScalarType.STRING || field.mapKind === "message" || field.scalar === ScalarType.STRING;
    case "message": return true;
    case "enum": return false;
  }
}

/** A map entry is a message of key (1) and value (2), in either order; the value's path names its key. */
function entry(bytes: Uint8Array, field: DescField & { fieldKind: "map" }, at: Path, out: FieldViolation[]): void {
  const reader = new BinaryReader(bytes);
  let key: Uint8Array | undefined;
  let value: Uint8Array | undefined;
  while (reader.pos < bytes.length) {
    const [number, wireType] = reader.tag();
    const data = wireType === WireType.LengthDelimited ? reader.bytes() : reader.skip(wireType, number);
    if (number === 1) key = data;
    else if (number === 2) value = data;
  }
  let here = at;
  if (field.mapKey === ScalarType.STRING && key) {
    if (!check(key, at, "a key", out)) here = [...at, new TextDecoder().decode(key)];
  }
  if (!value) return;
  if (field.mapKind === "message") walk(new BinaryReader(value), value.length, field.message, here, out);
  else if (field.scalar === ScalarType.STRING) check(value, here, "the value", out);
}

/** Adds a violation when `bytes` is not UTF-8; true when it did. */
function check(bytes: Uint8Array, at: Path, what: string, out: FieldViolation[]): boolean {
  const bad = firstInvalidUtf8(bytes);
  if (bad) out.push({ field: fieldPath(at), rule: "utf8", description: `byte ${bad.byte} of ${what} is not valid UTF-8` });
  return bad !== undefined;
}

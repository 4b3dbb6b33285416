// UTF-8 checks: where the first invalid byte is, and which string field of a request holds
// one (the wire bytes walked against the request's descriptor), so nothing is rewritten to U+FFFD.
import * as pb from "@ephemera/proto";
import { firstInvalidUtf8 } from "./utf8.js";
import { invalidStrings, requestTypes } from "./wire-strings.js";

const bytes = (...parts: (string | number[])[]) =>
  Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p, "utf8") : Buffer.from(p))));

describe("firstInvalidUtf8", () => {
  it("accepts valid UTF-8, multibyte characters and a literal U+FFFD (EF BF BD)", () => {
    expect(firstInvalidUtf8(bytes("plain"))).toBeUndefined();
    expect(firstInvalidUtf8(bytes("é 日本 🎉 \uFFFD"))).toBeUndefined();
    expect(firstInvalidUtf8(bytes([0xef, 0xbf, 0xbd]))).toBeUndefined();
  });

  it("gives the byte offset and the index in the leniently decoded text of the first bad byte", () => {
    expect(firstInvalidUtf8(bytes("ab", [0xc3, 0x28]))).toEqual({ byte: 2, index: 2 });
    // After a literal U+FFFD (3 bytes, 1 UTF-16 unit) and an emoji (4 bytes, 2 units).
    expect(firstInvalidUtf8(bytes("\uFFFD🎉x", [0xff]))).toEqual({ byte: 8, index: 4 });
    // A truncated 4-byte sequence at the end, and a lone continuation byte first.
    expect(firstInvalidUtf8(bytes("é", [0xf0, 0x9f, 0x98]))).toEqual({ byte: 2, index: 1 });
    expect(firstInvalidUtf8(bytes([0x80], "x"))).toEqual({ byte: 0, index: 0 });
    // Overlong encodings and surrogates are not UTF-8 either.
    expect(firstInvalidUtf8(bytes("a", [0xc0, 0xaf]))).toEqual({ byte: 1, index: 1 });
    expect(firstInvalidUtf8(bytes([0xed, 0xa0, 0x80]))).toEqual({ byte: 0, index: 0 });
  });

  it("keeps a leading U+FEFF as text, so offsets count it", () => {
    expect(firstInvalidUtf8(bytes("\uFEFF", [0xc3]))).toEqual({ byte: 3, index: 1 });
  });
});

/** `encoded` with every "XX" (ASCII, 2 bytes) replaced by 0xC3 0x28, an invalid 2-byte sequence of the same length. */
function corrupt(encoded: Uint8Array): Buffer {
  const out = Buffer.from(encoded);
  for (let at = out.indexOf("XX"); at >= 0; at = out.indexOf("XX", at + 2)) out.set([0xc3, 0x28], at);
  return out;
}

const types = requestTypes(Buffer.from(pb.descriptorSetBase64, "base64"));
const applyPlugin = types.get("/ephemera.v1.ResourcePluginService/Apply")!;
const applySandbox = types.get("/ephemera.v1.SandboxService/Apply")!;

const plugin = (script: string, name = "db"): pb.ApplyResourcePluginRequest => ({
  dryRun: false,
  plugin: pb.ResourcePlugin.fromJSON({
    name,
    spec: { runner: { image: "alpine:3" }, create: [{ name: "provision", script }, { name: "second", script }] },
  }),
});

const sandbox = (labels: Record<string, string>, params: Record<string, string>): pb.ApplySandboxRequest => ({
  dryRun: false,
  sandbox: pb.Sandbox.fromJSON({
    name: "a",
    spec: { cluster: "local", labels, resources: [{ name: "db", plugin: "db", params }] },
  }),
});

describe("invalidStrings", () => {
  it("knows the request type of every method of ephemera's services", () => {
    expect(applyPlugin.typeName).toBe("ephemera.v1.ApplyResourcePluginRequest");
    expect(types.get("/ephemera.v1.LogService/Get")?.typeName).toBe("ephemera.v1.GetLogsRequest");
  });

  it("names the field (JSON names, list indexes, map keys) and the byte offset in its value", () => {
    const twice = pb.ApplyResourcePluginRequest.encode(plugin("#!/bin/sh\necho XX\n")).finish();
    expect(invalidStrings(corrupt(twice), applyPlugin)).toEqual([
      { field: "plugin.spec.create[0].script", rule: "utf8", description: "byte 15 of the value is not valid UTF-8" },
      { field: "plugin.spec.create[1].script", rule: "utf8", description: "byte 15 of the value is not valid UTF-8" },
    ]);
    const name = pb.ApplyResourcePluginRequest.encode(plugin("#!/bin/sh\n", "dbXX")).finish();
    expect(invalidStrings(corrupt(name), applyPlugin)).toEqual([
      { field: "plugin.name", rule: "utf8", description: "byte 2 of the value is not valid UTF-8" },
    ]);
  });

  it("checks map values and map keys", () => {
    const encoded = pb.ApplySandboxRequest.encode(sandbox({ team: "aXX", "kXX": "v" }, { size: "XX" })).finish();
    expect(invalidStrings(corrupt(encoded), applySandbox)).toEqual([
      { field: "sandbox.spec.labels.team", rule: "utf8", description: "byte 1 of the value is not valid UTF-8" },
      { field: "sandbox.spec.labels", rule: "utf8", description: "byte 1 of a key is not valid UTF-8" },
      { field: "sandbox.spec.resources[0].params.size", rule: "utf8", description: "byte 0 of the value is not valid UTF-8" },
    ]);
  });

  it("finds nothing in a request of valid text, multibyte characters and a literal U+FFFD included", () => {
    const request = plugin("#!/bin/sh\necho 'é 日本 🎉 \uFFFD'\n", "db");
    const encoded = pb.ApplyResourcePluginRequest.encode(request).finish();
    expect(invalidStrings(encoded, applyPlugin)).toEqual([]);
    expect(pb.ApplyResourcePluginRequest.decode(encoded)).toEqual(request);
  });

  it("does not look into bytes fields: output values may be binary", () => {
    const put = pb.PutStepOutputsRequest.fromPartial({ outputs: [{ name: "blob", value: Buffer.from([0xc3, 0x28, 0xff]) }] });
    const type = types.get("/ephemera.v1.IOContext/PutStepOutputs")!;
    expect(invalidStrings(pb.PutStepOutputsRequest.encode(put).finish(), type)).toEqual([]);
  });
});

import * as pb from "@ephemera/proto";
import { outputDoc, sandboxDoc } from "./render.js";
import { compareVersionsDesc, table } from "./table.js";

describe("outputDoc", () => {
  const text = pb.ResourceOutput.fromPartial({ key: "provision.host", size: 5, value: Buffer.from("db-42") });
  const binary = pb.ResourceOutput.fromPartial({ key: "provision.key", size: 3, value: Buffer.from([0xff, 0x00, 0xfe]) });

  it("shows only the size unless asked", () => {
    expect(outputDoc(text, false)).toEqual({ size: 5 });
  });

  it("shows UTF-8 values as text and anything else as base64", () => {
    expect(outputDoc(text, true)).toEqual({ size: 5, value: "db-42" });
    expect(outputDoc(binary, true)).toEqual({ size: 3, base64: Buffer.from([0xff, 0x00, 0xfe]).toString("base64") });
  });
});

describe("sandboxDoc", () => {
  it("has the fields scripts depend on, the spec file-shaped", () => {
    const doc = sandboxDoc(
      pb.SandboxView.fromPartial({
        name: "feature-x",
        routingKey: "rk",
        spec: { cluster: "local", resources: [{ name: "db", plugin: "hello-db", params: { dbname: "orders" } }] },
        status: { ready: true, reason: "Ready" },
        endpoints: [{ name: "web", target: "http://web", url: "https://u", baselineUrl: "https://web.example" }],
        resources: [{ name: "db", plugin: "hello-db", version: "1.0.0", status: "Ready", outputs: [{ key: "a.b", size: 1, value: Buffer.from("x") }] }],
        createdAt: "c",
        updatedAt: "u",
      }),
      false,
    );
    expect(doc).toEqual({
      name: "feature-x",
      routingKey: "rk",
      spec: { cluster: "local", resources: [{ name: "db", plugin: "hello-db", params: { dbname: "orders" } }] },
      status: { ready: true, reason: "Ready", message: "" },
      endpoints: [{ name: "web", url: "https://u", target: "http://web", baselineUrl: "https://web.example" }],
      resources: [{ name: "db", plugin: "hello-db", version: "1.0.0", status: "Ready", outputs: { "a.b": { size: 1 } } }],
      createdAt: "c",
      updatedAt: "u",
    });
  });
});

describe("table", () => {
  it("aligns columns", () => {
    expect(table(["NAME", "VERSION"], [["hello-db", "1.0.0"], ["q", "10.0.0"]])).toBe(
      "NAME       VERSION\nhello-db   1.0.0\nq          10.0.0\n",
    );
  });
});

describe("compareVersionsDesc", () => {
  it("orders by semver precedence, newest first", () => {
    const versions = ["1.0.0", "0.0.0", "1.10.0", "1.2.0", "1.0.0-rc.1", "1.0.0-alpha", "1.0.0-rc.10", "2.0.0-beta"];
    expect([...versions].sort(compareVersionsDesc)).toEqual([
      "2.0.0-beta", "1.10.0", "1.2.0", "1.0.0", "1.0.0-rc.10", "1.0.0-rc.1", "1.0.0-alpha", "0.0.0",
    ]);
  });
});

import { strategicMerge, type Json } from "./merge.js";

const base: Json = {
  metadata: { labels: { "ephemera.dev/step": "s" }, annotations: { a: "1" } },
  spec: {
    restartPolicy: "Never",
    containers: [
      { name: "main", image: "debian", command: ["/ephemera/entrypoint"], env: [{ name: "A", value: "1" }], volumeMounts: [{ name: "agent", mountPath: "/ephemera" }] },
      { name: "ephemera-sidecar", image: "agent", args: ["sidecar"] },
    ],
    volumes: [{ name: "agent", emptyDir: {} }],
    tolerations: [{ key: "k1", operator: "Exists" }],
  },
};
const spec = (v: Json) => (v as { spec: Record<string, Json> }).spec;
const main = (v: Json) => (spec(v)["containers"] as Array<Record<string, Json>>).find((c) => c["name"] === "main")!;

describe("strategic merge of a pod template overlay", () => {
  const cases: Array<[string, Json, (merged: Json) => void]> = [
    ["merges labels and annotations key by key", { metadata: { labels: { team: "db" }, annotations: { "vault.hashicorp.com/agent-inject": "true" } } }, (m) => {
      expect((m as { metadata: Json }).metadata).toEqual({ labels: { "ephemera.dev/step": "s", team: "db" }, annotations: { a: "1", "vault.hashicorp.com/agent-inject": "true" } });
    }],
    ["merges a container by name, its env by name, adding and overriding", { spec: { containers: [{ name: "main", env: [{ name: "A", value: "2" }, { name: "B", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] }] } }, (m) => {
      expect(main(m)["env"]).toEqual([{ name: "A", value: "2" }, { name: "B", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }]);
      expect(main(m)["image"]).toBe("debian");
      expect(spec(m)["containers"]).toHaveLength(2);
    }],
    ["appends a container the base does not have", { spec: { containers: [{ name: "proxy", image: "envoy" }] } }, (m) => {
      expect((spec(m)["containers"] as Array<{ name: string }>).map((c) => c.name)).toEqual(["main", "ephemera-sidecar", "proxy"]);
    }],
    ["merges volumeMounts by mountPath and volumes by name", { spec: { volumes: [{ name: "creds", secret: { secretName: "db" } }], containers: [{ name: "main", volumeMounts: [{ name: "creds", mountPath: "/creds" }, { name: "agent2", mountPath: "/ephemera" }] }] } }, (m) => {
      expect(spec(m)["volumes"]).toEqual([{ name: "agent", emptyDir: {} }, { name: "creds", secret: { secretName: "db" } }]);
      expect(main(m)["volumeMounts"]).toEqual([{ name: "agent2", mountPath: "/ephemera" }, { name: "creds", mountPath: "/creds" }]);
    }],
    ["replaces lists without a merge key: tolerations, envFrom, command", { spec: { tolerations: [{ key: "k2", operator: "Exists" }], containers: [{ name: "main", envFrom: [{ configMapRef: { name: "c" } }], command: ["sh"] }] } }, (m) => {
      expect(spec(m)["tolerations"]).toEqual([{ key: "k2", operator: "Exists" }]);
      expect(main(m)["envFrom"]).toEqual([{ configMapRef: { name: "c" } }]);
      expect(main(m)["command"]).toEqual(["sh"]);
    }],
    ["sets scalars and maps the base lacks: serviceAccountName, nodeSelector, resources, imagePullSecrets", {
      spec: { serviceAccountName: "runner", nodeSelector: { pool: "ci" }, imagePullSecrets: [{ name: "regcred" }], containers: [{ name: "main", resources: { limits: { memory: "1Gi" } } }] },
    }, (m) => {
      expect(spec(m)).toMatchObject({ serviceAccountName: "runner", nodeSelector: { pool: "ci" }, imagePullSecrets: [{ name: "regcred" }] });
      expect(main(m)["resources"]).toEqual({ limits: { memory: "1Gi" } });
    }],
    ["removes a key set to null", { metadata: { annotations: { a: null } } }, (m) => {
      expect((m as { metadata: { annotations: Json } }).metadata.annotations).toEqual({});
    }],
    ["deletes a list item with $patch: delete, replaces a map with $patch: replace", { metadata: { labels: { $patch: "replace", only: "this" } }, spec: { containers: [{ name: "ephemera-sidecar", $patch: "delete" }] } }, (m) => {
      expect((m as { metadata: { labels: Json } }).metadata.labels).toEqual({ only: "this" });
      expect((spec(m)["containers"] as Array<{ name: string }>).map((c) => c.name)).toEqual(["main"]);
    }],
  ];
  it.each(cases)("%s", (_, overlay, check) => {
    const before = JSON.stringify(base);
    check(strategicMerge(base, overlay));
    expect(JSON.stringify(base)).toBe(before); // the base is not changed
  });

  it("leaves the base as it is for an empty overlay", () => {
    expect(strategicMerge(base, {})).toEqual(base);
  });
});

// A Service's short names become the fully qualified name a pod's search domains would give.
import { clusterFqdn } from "./cluster-dns.js";

describe("cluster names", () => {
  it("completes <svc>.<ns> and <svc>.<ns>.svc, and leaves other names as they are", () => {
    expect(["backend.demo", "backend.demo.svc", "backend.demo.svc.cluster.local", "localhost", "10.0.0.7", "a.b.c"].map(clusterFqdn))
      .toEqual(["backend.demo.svc.cluster.local", "backend.demo.svc.cluster.local", "backend.demo.svc.cluster.local", "localhost", "10.0.0.7", "a.b.c"]);
  });
});

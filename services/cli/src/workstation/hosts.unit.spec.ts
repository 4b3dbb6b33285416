// The host entries: a stable loopback address per Service, and the marked block that is
// added to the hosts file and taken out again without touching the rest of it.
import { BEGIN, END, hostEntries, withBlock } from "./hosts.js";

const svc = (namespace: string, name: string, ports = [8080]) => ({ namespace, name, ports });

describe("hostEntries", () => {
  it("gives each Service both names and an address of its own in 127.77/16, the same whatever else the cluster has", () => {
    const alone = hostEntries([svc("demo-routing", "backend")]);
    const among = hostEntries([svc("a", "x"), svc("demo-routing", "backend"), svc("b", "y", [80, 443])]);
    expect(alone[0]).toEqual({
      names: ["backend.demo-routing.svc", "backend.demo-routing"], address: expect.stringMatching(/^127\.77\.\d{1,3}\.\d{1,3}$/), ports: [8080], target: "backend.demo-routing.svc",
    });
    expect(among.find((e) => e.target === "backend.demo-routing.svc")?.address).toBe(alone[0]!.address);
    expect(new Set(among.map((e) => e.address)).size).toBe(3);
    for (const e of among) expect(Number(e.address.split(".")[3])).toBeGreaterThanOrEqual(1);
  });

  it("gives distinct addresses to many Services (collisions take the next free one)", () => {
    const many = hostEntries(Array.from({ length: 2000 }, (_, i) => svc(`ns${i % 7}`, `svc${i}`)));
    expect(new Set(many.map((e) => e.address)).size).toBe(2000);
  });
});

describe("withBlock", () => {
  const hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n";
  const entries = hostEntries([svc("demo-routing", "backend")]);

  it("appends the marked block, replaces it on the next write, and removes it leaving the file as it was", () => {
    const added = withBlock(hosts, entries);
    expect(added).toBe(`${hosts}${BEGIN}\n${entries[0]!.address}\tbackend.demo-routing.svc backend.demo-routing\n${END}\n`);
    const replaced = withBlock(added, hostEntries([svc("shop", "web")]));
    expect(replaced).not.toContain("backend");
    expect(replaced.match(/# BEGIN ephemera/g)).toHaveLength(1);
    expect(withBlock(replaced, [])).toBe(hosts);
  });

  it("keeps what follows the block", () => {
    const added = withBlock(hosts, entries);
    expect(withBlock(`${added}10.0.0.1\tafter\n`, [])).toBe(`${hosts}10.0.0.1\tafter\n`);
  });
});

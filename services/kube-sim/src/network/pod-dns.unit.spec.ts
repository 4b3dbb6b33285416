import { podDnsArgs } from "./pod-dns.js";

const cluster = { server: "10.96.3.10", domain: "cluster.local" };

it("gives a ClusterFirst pod the cluster DNS, its namespace's search domains and ndots:5, with dnsConfig after them", () => {
  expect(podDnsArgs({}, "shop", cluster)).toEqual([
    "--dns", "10.96.3.10",
    "--dns-search", "shop.svc.cluster.local", "--dns-search", "svc.cluster.local", "--dns-search", "cluster.local",
    "--dns-opt", "ndots:5",
  ]);
  expect(podDnsArgs({ dnsConfig: { nameservers: ["192.0.2.53"], searches: ["corp.example", "svc.cluster.local"], options: [{ name: "ndots", value: "2" }, { name: "edns0" }] } }, "shop", cluster))
    .toEqual([
      "--dns", "10.96.3.10", "--dns", "192.0.2.53",
      "--dns-search", "shop.svc.cluster.local", "--dns-search", "svc.cluster.local", "--dns-search", "cluster.local", "--dns-search", "corp.example",
      "--dns-opt", "ndots:2", "--dns-opt", "edns0",
    ]);
});

it("leaves Default pods, and ClusterFirst ones without cluster DNS, Docker's copy of the machine's resolvers; None takes dnsConfig only", () => {
  expect(podDnsArgs({ dnsPolicy: "Default" }, "shop", cluster)).toEqual([]);
  expect(podDnsArgs({ dnsPolicy: "ClusterFirst" }, "shop", undefined)).toEqual([]);
  expect(podDnsArgs({ dnsPolicy: "None", dnsConfig: { nameservers: ["192.0.2.53"], searches: ["a.example"] } }, "shop", cluster))
    .toEqual(["--dns", "192.0.2.53", "--dns-search", "a.example"]);
});

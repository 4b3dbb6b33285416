import {
  DEFAULT_STEP_DENY, formatIPv4, networkNames, nftRuleset, parseCidr, parseNetworkName, pickSubnet, stepDeny, stepDns, stepResolvers, stepSubnets,
} from "./network-plan.js";
import { stepNetworkConfig } from "../config.js";

describe("step network plan", () => {
  const pool = stepSubnets("10.237.0.0/16");

  it("takes the first free /24 of the pool from where it starts, skipping the host's networks and routes", () => {
    const taken = [parseCidr("10.237.5.0/24")!, parseCidr("10.237.6.9/32")!, parseCidr("192.0.2.0/24")!];
    expect(formatIPv4(pickSubnet(pool, taken, 5)!.base)).toBe("10.237.7.0");
    expect(formatIPv4(pickSubnet(pool, taken, 255)!.base)).toBe("10.237.255.0");
    expect(formatIPv4(pickSubnet(pool, taken, 256)!.base)).toBe("10.237.0.0"); // wraps
    expect(pickSubnet(pool, [parseCidr("10.0.0.0/8")!], 0)).toBeUndefined(); // a route over the whole pool
  });

  it("names everything so that a later runner of the prefix reads back whose it was", () => {
    const n = networkNames("t_abc", 4321, "a1b2c3");
    expect(n.bridge.length).toBeLessThanOrEqual(15);
    expect(n.veth(249).length).toBeLessThanOrEqual(15);
    expect(parseNetworkName(n.netns(3))).toEqual({ tag: n.tag, pid: 4321, id: "a1b2c3", forwarded: [] });
    expect(parseNetworkName(n.table)).toEqual({ tag: n.tag, pid: 4321, id: "a1b2c3", forwarded: [] });
    expect(parseNetworkName(`${n.alias} fwd=eth0,wlan0`)).toEqual({ tag: n.tag, pid: 4321, id: "a1b2c3", forwarded: ["eth0", "wlan0"] });
    expect(parseNetworkName("ephemera-other")).toBeUndefined();
  });

  it("gives steps resolvers they can reach: not the host's loopback stub, its upstreams instead", () => {
    const host = "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch corp.example\n";
    const upstream = "nameserver 10.1.2.3\nnameserver fd00::1\n";
    expect(stepResolvers(host, upstream, undefined)).toEqual({
      nameservers: ["10.1.2.3"], source: "systemd-resolved's upstream servers", text: "nameserver 10.1.2.3\noptions edns0 trust-ad\nsearch corp.example\n",
    });
    expect(stepResolvers("nameserver 10.255.255.53\n", undefined, undefined).nameservers).toEqual(["10.255.255.53"]);
    expect(stepResolvers(host, upstream, ["9.9.9.9"]).source).toBe("EPHEMERA_STEP_DNS");
    expect(stepResolvers(host, undefined, undefined).nameservers).toEqual([]);
  });

  it("refuses settings that cannot work, naming the variable and the rule", () => {
    expect(() => stepSubnets("10.237.0.0/25")).toThrow('EPHEMERA_STEP_SUBNETS must be an IPv4 range of /8 to /24 such as 10.237.0.0/16, got "10.237.0.0/25"');
    expect(() => stepSubnets("10.300.0.0/16")).toThrow("EPHEMERA_STEP_SUBNETS");
    expect(() => stepDns("127.0.0.53, 10.0.0.2")).toThrow('EPHEMERA_STEP_DNS must list IPv4 addresses a step can reach (not loopback), got "127.0.0.53"');
    expect(stepDns("10.0.0.2, 10.0.0.3")).toEqual(["10.0.0.2", "10.0.0.3"]);
    expect(stepDns("")).toBeUndefined();
  });

  it("refuses the steps link-local always, and the ranges of EPHEMERA_STEP_DENY (private and CGNAT unless told), but DNS to their resolvers", () => {
    const names = networkNames("t_abc", 4321, "a1b2c3");
    const subnet = parseCidr("10.237.4.0/24")!;
    const forward = (deny: string, resolvers: string[]) =>
      nftRuleset(names, subnet, stepDeny(deny), resolvers).split("chain forward")[1]!.split("chain postrouting")[0]!
        .split("\n").map((l) => l.trim()).filter((l) => l.startsWith("iifname"));
    expect(forward(DEFAULT_STEP_DENY, ["10.255.255.53"])).toEqual([
      // Rule order is what decides: the resolvers' port 53 before the refusal, the refusal before the rest.
      'iifname "ephba1b2c3" ip daddr { 10.255.255.53 } meta l4proto { tcp, udp } th dport 53 accept',
      'iifname "ephba1b2c3" ip daddr { 169.254.0.0/16, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 } ' +
        "reject with icmpx type admin-prohibited",
      'iifname "ephba1b2c3" accept',
    ]);
    // "none": link-local only; ranges inside another are left out (nftables refuses overlapping elements).
    expect(forward("none", [])[0]).toBe('iifname "ephba1b2c3" ip daddr { 169.254.0.0/16 } reject with icmpx type admin-prohibited');
    expect(forward("169.254.169.254/32, 10.1.0.0/16,10.0.0.0/8", [])[0]).toContain("ip daddr { 169.254.0.0/16, 10.0.0.0/8 } reject");
  });

  it("reads EPHEMERA_STEP_DENY, naming it and the rule when a range is not one", () => {
    expect(stepNetworkConfig({}).stepDeny).toEqual(stepDeny(DEFAULT_STEP_DENY));
    expect(stepNetworkConfig({ EPHEMERA_STEP_DENY: "none" }).stepDeny).toEqual([]);
    expect(stepNetworkConfig({ EPHEMERA_STEP_DENY: "10.0.0.1/8, 192.0.2.7" }).stepDeny).toEqual([parseCidr("10.0.0.0/8"), parseCidr("192.0.2.7/32")]);
    expect(() => stepNetworkConfig({ EPHEMERA_STEP_DENY: "10.0.0.0/8,mirror.local,192.168.0.0/33" })).toThrow(
      'EPHEMERA_STEP_DENY must list IPv4 ranges such as 10.0.0.0/8 (comma-separated), or be "none"; not ranges: "mirror.local, 192.168.0.0/33"');
  });

  it("reads EPHEMERA_STEP_NETWORK (outside unless told), refusing an unknown mode", () => {
    expect(stepNetworkConfig({}).stepNetwork).toBe("outside");
    expect(stepNetworkConfig({ EPHEMERA_STEP_NETWORK: "none", EPHEMERA_STEP_DNS: "10.0.0.2" })).toMatchObject({ stepNetwork: "none", stepDns: ["10.0.0.2"] });
    expect(() => stepNetworkConfig({ EPHEMERA_STEP_NETWORK: "bridge" })).toThrow('EPHEMERA_STEP_NETWORK must be one of outside, none, host, got "bridge"');
  });
});

// Endpoint URLs: the endpoint's name and the routing key in one DNS label, long names cut with a hash.
import { endpointUrls } from "./endpoints.js";

const url = (name: string, key = "abcdef123456") => endpointUrls([{ name, target: "http://orders.shop.svc:8080" }], key, "preview.test")[0]!;

describe("endpoint URLs", () => {
  it("are <endpoint>--<routing key>.<domain>, with the target's baseline URL", () => {
    expect(url("web")).toEqual({ name: "web", target: "http://orders.shop.svc:8080", url: "https://web--abcdef123456.preview.test", baselineUrl: "https://orders-shop-8080.preview.test" });
  });

  it("keep a name that fits one DNS label as it is, and cut a longer one with a hash, apart and the same each time", () => {
    const fits = "a".repeat(49);
    expect(url(fits).url).toBe(`https://${fits}--abcdef123456.preview.test`);
    const [one, two] = [url(`${"b".repeat(60)}-one`).url, url(`${"b".repeat(60)}-two`).url];
    for (const u of [one, two]) {
      const label = new URL(u).hostname.split(".")[0]!;
      expect(label.length).toBeLessThanOrEqual(63);
      expect(label).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(label.endsWith("--abcdef123456")).toBe(true);
    }
    expect(one).not.toBe(two);
    expect(url(`${"b".repeat(60)}-one`).url).toBe(one);
  });
});

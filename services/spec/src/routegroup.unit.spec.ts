// Which sandboxes a route group's match selects, by their labels.
import * as pb from "@ephemera/proto";
import { routeGroupMatches } from "./routegroup.js";
import { validateRouteGroup } from "./validate.js";

const match = (m: unknown) => validateRouteGroup({ name: "rg", spec: { cluster: "local", match: m } }).spec!.match;
const label = (key: string, value: string) => ({ label: { key, value } });

describe("a route group's match", () => {
  it.each([
    ["x-*", "x-backend", true],
    ["x-*", "x-", true],
    ["x-*", "y-backend", false],
    ["x-?", "x-1", true],
    ["x-?", "x-12", false],
    ["x-[ab]", "x-b", true],
    ["x-[ab]", "x-c", false],
    ["exact", "exact", true],
    ["exact", "exactly", false],
    // Label values are not paths: `*` runs over `/` and dots.
    ["team/*", "team/shop/web", true],
    ["*", ".hidden", true],
    // Braces are literal text, not alternatives.
    ["{a,b}", "a", false],
    ["{a,b}", "{a,b}", true],
  ])("label value glob %j against %j: %s", (glob, value, selected) => {
    expect(routeGroupMatches(match(label("feature", glob)), { feature: value })).toBe(selected);
  });

  it("needs the label to be there", () => {
    expect(routeGroupMatches(match(label("feature", "*")), { team: "other" })).toBe(false);
  });

  it("all needs every entry, any one of them, nested", () => {
    const m = match({ any: [label("feature", "x-*"), { all: [label("team", "shop"), label("stage", "e2e")] }] });
    expect(routeGroupMatches(m, { feature: "x-backend" })).toBe(true);
    expect(routeGroupMatches(m, { team: "shop", stage: "e2e" })).toBe(true);
    expect(routeGroupMatches(m, { team: "shop", stage: "dev" })).toBe(false);
    expect(routeGroupMatches(m, {})).toBe(false);
  });

  it("selects nothing without a match", () => {
    expect(routeGroupMatches(undefined, { feature: "x" })).toBe(false);
    expect(routeGroupMatches(pb.RouteGroupMatch.fromPartial({}), { feature: "x" })).toBe(false);
  });
});

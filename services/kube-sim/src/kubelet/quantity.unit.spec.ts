import { quantity } from "./quantity.js";

it("reads binary and decimal suffixes, millis and exponents", () => {
  expect([quantity("64Mi", "m"), quantity("1G", "m"), quantity("500m", "c"), quantity("2", "c"), quantity("1e3", "m"), quantity("0.5Gi", "m")])
    .toEqual([64 * 2 ** 20, 1e9, 0.5, 2, 1000, 2 ** 29]);
});

it("names the field and the rule when the text is not a quantity", () => {
  expect(() => quantity("lots", "resources.limits.memory")).toThrow('resources.limits.memory: "lots" is not a quantity');
});

// Two stacks with different prefixes and ports on one machine, one NATS and one Redis:
// the same plugin and sandbox names in both, and neither sees the other.
import { startTestStack, type TestStack } from "../support/stack.js";

const plugin = (word: string) => `
name: twin
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: say
    outputs: [{name: word, valueFromPath: /tmp/word}]
    script: |
      #!/bin/sh
      printf '${word}' > /tmp/word
`;
const sandbox = `
name: twin-sb
spec:
  cluster: local
  resources: [{name: r, plugin: twin}]
`;

describe("two stacks side by side", () => {
  let a: TestStack;
  let b: TestStack;
  beforeAll(async () => { [a, b] = await Promise.all([startTestStack("sa"), startTestStack("sb")]); }, 90_000);
  afterAll(async () => { await Promise.all([a?.stop(), b?.stop()]); });

  it("keeps plugins, sandboxes, outputs and deletions apart", async () => {
    for (const [stack, word] of [[a, "alpha"], [b, "beta"]] as const) {
      expect((await stack.eph(["plugin", "apply", "-f", stack.file("p.yaml", plugin(word))])).code).toBe(0);
      const applied = await stack.eph(["sandbox", "apply", "-f", stack.file("s.yaml", sandbox)]);
      expect(applied).toMatchObject({ code: 0 });
    }
    const outputOf = async (stack: TestStack) =>
      JSON.parse((await stack.eph(["sandbox", "get", "twin-sb", "-o", "json", "--show-outputs"])).stdout).resources[0].outputs["say.word"].value;
    expect(await outputOf(a)).toBe("alpha");
    expect(await outputOf(b)).toBe("beta");

    expect((await a.eph(["sandbox", "delete", "twin-sb"])).code).toBe(0);
    expect((await a.eph(["sandbox", "get", "twin-sb"])).code).toBe(1);
    expect(await outputOf(b)).toBe("beta");
    const listB = JSON.parse((await b.eph(["sandbox", "list", "-o", "json"])).stdout) as Array<{ name: string }>;
    expect(listB.map((s) => s.name)).toEqual(["twin-sb"]);
    const deleted = (e: { type: string }) => e.type === "ephemera.sandbox.deleted.v1";
    expect((await a.events()).some(deleted)).toBe(true);
    expect((await b.events()).some(deleted)).toBe(false);
  });
});

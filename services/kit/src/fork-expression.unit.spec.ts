import { fieldsRead, parseForkExpression, renderForkExpression, type ParsedForkExpression } from "./fork-expression.js";

const values = { Host: "cart-rk1.shop.svc", Port: "9090" };
const render = (expression: string) => {
  const parsed = parseForkExpression(expression);
  if ("problem" in parsed) throw new Error(parsed.problem);
  return renderForkExpression(parsed.parts, values);
};
const problem = (expression: string) => (parseForkExpression(expression) as Extract<ParsedForkExpression, { problem: string }>).problem;

describe("a fork expression", () => {
  it.each([
    ["{{ .Service.Host }}", "cart-rk1.shop.svc"],
    ["{{.Service.Host}}:{{ .Service.Port }}", "cart-rk1.shop.svc:9090"],
    ["{{   .Service.Port\t}}", "9090"],
    ["http://{{.Service.Host}}:{{ .Service.Port }}/api", "http://cart-rk1.shop.svc:9090/api"],
    ["no action at all", "no action at all"],
    ["a }} alone is text", "a }} alone is text"],
    ["host = {{- .Service.Host -}} ;", "host =cart-rk1.shop.svc;"],
    ["{{/* the cart's fork */}}{{ .Service.Host }}", "cart-rk1.shop.svc"],
    ["x {{- /* trimmed */ -}} y", "xy"],
  ])("%j is %j", (expression, value) => {
    expect(render(expression)).toBe(value);
  });

  it("is the host when empty", () => {
    expect(render("")).toBe("cart-rk1.shop.svc");
  });

  it("says which fields it reads", () => {
    const parsed = parseForkExpression("{{ .Service.Host }}/a") as { parts: [] };
    expect([...fieldsRead(parsed.parts)]).toEqual(["Host"]);
  });

  it.each([
    ["{{ .Service.Foo }}", "unknown field .Service.Foo in {{ .Service.Foo }}"],
    ["{{ .Service.host }}", "unknown field .Service.host"],
    ["{{ .Service }}", "unknown field .Service "],
    ["{{ .Service.Host.Name }}", "unknown field .Service.Host.Name"],
    ["{{ .Workload.Host }}", "unknown field .Workload.Host"],
    ["{{ .Service.Host", 'unclosed action: the "{{" at character 1 has no "}}"'],
    ["http://{{ .Service.Host }}:{{ .Service.Port", 'the "{{" at character 28'],
    ["{{ }}", "empty action {{ }}"],
    ['{{ printf "%s" .Service.Host }}', "is not supported"],
    ["{{ .Service.Host | upper }}", "is not supported"],
    ["{{ $x := .Service.Host }}", "is not supported"],
    ["{{ /* not a Go comment: a space before it */ }}", "is not supported"],
  ])("%j is refused: %s", (expression, says) => {
    expect(problem(expression)).toContain(says);
  });
});

// Who can reach a server, and what an API without tokens is allowed to be.
import { isLoopback, openApiNotice } from "./listen.js";

describe("isLoopback", () => {
  it.each(["127.0.0.1:7400", "127.9.9.9:1", "localhost:7400", "[::1]:7400", "[::ffff:127.0.0.1]:7400"])("%s is loopback", (listen) => {
    expect(isLoopback(listen)).toBe(true);
  });
  it.each(["0.0.0.0:7400", "[::]:7400", "10.0.0.5:7400", "api.internal:7400", ":7400", "128.0.0.1:7400"])("%s is not", (listen) => {
    expect(isLoopback(listen)).toBe(false);
  });
});

describe("an API without tokens", () => {
  const OPEN = "the API on %s is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, so anyone who reaches it may apply and delete";

  it("is open on loopback, and says so", () => {
    expect(openApiNotice("127.0.0.1:7400", { secured: false }))
      .toBe(`${OPEN.replace("%s", "127.0.0.1:7400")} (loopback only: processes of this machine)`);
    expect(openApiNotice("[::1]:7400", { secured: false })).toMatch(/loopback only/);
  });

  it("is refused on an address other machines reach, unless EPHEMERA_API_ALLOW_OPEN", () => {
    expect(() => openApiNotice("0.0.0.0:7400", { secured: false })).toThrow(`${OPEN.replace("%s", "0.0.0.0:7400")}, from other machines too. ` +
      "Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true");
    expect(openApiNotice("0.0.0.0:7400", { secured: false, allowOpen: true })).toMatch(/from other machines too \(EPHEMERA_API_ALLOW_OPEN\)$/);
  });

  it("is not what an API with tokens is", () => {
    expect(openApiNotice("0.0.0.0:7400", { secured: true })).toBeUndefined();
  });
});

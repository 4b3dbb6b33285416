// Without tokens the API is open: said at start on loopback, refused elsewhere unless asked for.
import { openApiNotice } from "./index.js";
import type { ApiAccess } from "./auth/access.js";

const access: ApiAccess = { describe: "tokens file (1 token)", authenticate: () => Promise.reject(new Error("unused")) };
const OPEN = "the API on %s is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, so anyone who reaches it may apply and delete";

describe("an API without tokens", () => {
  it("is open on loopback, and says so", () => {
    expect(openApiNotice({ listen: "127.0.0.1:7400" })).toBe(`${OPEN.replace("%s", "127.0.0.1:7400")} (loopback only: processes of this machine)`);
    expect(openApiNotice({ listen: "[::1]:7400" })).toMatch(/loopback only/);
  });

  it("is refused on an address other machines reach, unless EPHEMERA_API_ALLOW_OPEN", () => {
    expect(() => openApiNotice({ listen: "0.0.0.0:7400" })).toThrow(
      `${OPEN.replace("%s", "0.0.0.0:7400")}, from other machines too. Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true`);
    expect(openApiNotice({ listen: "0.0.0.0:7400", allowOpen: true })).toMatch(/from other machines too \(EPHEMERA_API_ALLOW_OPEN\)$/);
  });

  it("is not what an API with tokens is", () => {
    expect(openApiNotice({ listen: "0.0.0.0:7400", access })).toBeUndefined();
  });
});

import { isLoopback } from "./listen.js";

describe("isLoopback", () => {
  it.each(["127.0.0.1:7400", "127.9.9.9:1", "localhost:7400", "[::1]:7400", "[::ffff:127.0.0.1]:7400"])("%s is loopback", (listen) => {
    expect(isLoopback(listen)).toBe(true);
  });
  it.each(["0.0.0.0:7400", "[::]:7400", "10.0.0.5:7400", "api.internal:7400", ":7400", "128.0.0.1:7400"])("%s is not", (listen) => {
    expect(isLoopback(listen)).toBe(false);
  });
});

import { H2_PREFACE, MAX_REQUEST_LINE, sniff } from "./sniff.js";

const b = (s: string) => Buffer.from(s, "latin1");

describe("sniff", () => {
  it("takes the HTTP/2 connection preface for h2c, once it is whole", () => {
    expect(sniff(Buffer.concat([H2_PREFACE, b("\x00\x00\x12\x04")]))).toBe("h2c");
    expect(sniff(H2_PREFACE)).toBe("h2c");
    for (const n of [1, 3, 10, 23]) expect(sniff(H2_PREFACE.subarray(0, n))).toBeUndefined();
  });

  it("takes an HTTP/1.x request line for HTTP/1, once its CRLF has arrived", () => {
    expect(sniff(b("GET /orders?id=1 HTTP/1.1\r\nHost: orders\r\n\r\n"))).toBe("http1");
    expect(sniff(b("POST http://orders.shop.svc/x HTTP/1.0\r\n"))).toBe("http1");
    expect(sniff(b("OPTIONS * HTTP/1.1\r\n"))).toBe("http1");
    // "PRI * HTTP/1.1" parts from the preface at its 10th byte.
    expect(sniff(b("PRI * HTTP/1.1\r\n"))).toBe("http1");
    for (const partial of ["G", "GET", "GET ", "GET /a", "GET /a ", "GET /a HTTP/", "GET /a HTTP/1.1", "GET /a HTTP/1.1\r"]) {
      expect([partial, sniff(b(partial))]).toEqual([partial, undefined]);
    }
  });

  it("takes anything else for TCP as soon as it cannot be HTTP", () => {
    expect(sniff(b("\x16\x03\x01\x02\x00\x01"))).toBe("tcp"); // a TLS ClientHello
    expect(sniff(b("\x00\x00\x00\x08\x04\xd2\x16\x2f"))).toBe("tcp"); // PostgreSQL's SSLRequest
    expect(sniff(b("*1\r\n$4\r\nPING\r\n"))).toBe("tcp"); // Redis
    expect(sniff(b("GET key\r\n"))).toBe("tcp"); // a Redis or memcached inline command: no HTTP version
    expect(sniff(b("GET / HTTP/2.0\r\n"))).toBe("tcp");
    expect(sniff(b("GET /a HTTX"))).toBe("tcp");
    expect(sniff(b("hello world\r\n"))).toBe("tcp");
    expect(sniff(b("PRI\x00"))).toBe("tcp");
  });

  it("stops waiting for a request line at its longest", () => {
    expect(sniff(b(`GET /${"a".repeat(MAX_REQUEST_LINE)}`))).toBe("http1");
    expect(sniff(b(`GET /${"a".repeat(MAX_REQUEST_LINE - 10)}`))).toBeUndefined();
  });

  it("cannot tell from nothing", () => {
    expect(sniff(Buffer.alloc(0))).toBeUndefined();
  });
});

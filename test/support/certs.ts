// Certificates for TLS tests, made at run time with openssl in a temporary directory (no key
// is ever committed): a CA, a server certificate for localhost and 127.0.0.1, a client
// certificate for mTLS, and a second CA that signed none of them.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClientTls, ServerTls } from "@ephemera/kit";

export interface CertFiles {
  cert: string;
  key: string;
}

export interface TestCerts {
  dir: string;
  /** Paths of the PEM files. */
  files: { ca: string; otherCa: string; server: CertFiles; client: CertFiles };
  /** What a server on these certificates is started with (`mtls`: clients must show the client certificate). */
  server(options?: { mtls?: boolean }): ServerTls;
  /** What a client that trusts the CA uses (`withCert`: it shows the client certificate). */
  client(options?: { withCert?: boolean; serverName?: string }): ClientTls;
  remove(): void;
}

const openssl = (dir: string, args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });

function keyPair(dir: string, name: string): void {
  openssl(dir, ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", `${name}.key`]);
}

function selfSignedCa(dir: string, name: string): void {
  keyPair(dir, name);
  openssl(dir, ["req", "-x509", "-new", "-key", `${name}.key`, "-out", `${name}.crt`, "-days", "2", "-subj", `/CN=${name}`,
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
}

function signed(dir: string, name: string, extensions: string): void {
  keyPair(dir, name);
  openssl(dir, ["req", "-new", "-key", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`]);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(dir, ["x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", String(Date.now()),
    "-days", "2", "-out", `${name}.crt`, "-extfile", `${name}.ext`]);
}

export function makeCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), "eph-certs-"));
  try {
    selfSignedCa(dir, "ca");
    selfSignedCa(dir, "other-ca");
    signed(dir, "server", "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n");
    signed(dir, "client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n");
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const path = (name: string) => join(dir, name);
  const files = {
    ca: path("ca.crt"),
    otherCa: path("other-ca.crt"),
    server: { cert: path("server.crt"), key: path("server.key") },
    client: { cert: path("client.crt"), key: path("client.key") },
  };
  const read = (p: string) => readFileSync(p, "utf8");
  return {
    dir,
    files,
    server: (options = {}) => ({
      cert: read(files.server.cert), key: read(files.server.key), ...(options.mtls ? { clientCa: read(files.ca) } : {}),
    }),
    client: (options = {}) => ({
      ca: read(files.ca),
      ...(options.withCert ? { cert: read(files.client.cert), key: read(files.client.key) } : {}),
      ...(options.serverName ? { serverName: options.serverName } : {}),
    }),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

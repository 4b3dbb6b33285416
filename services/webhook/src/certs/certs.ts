// The webhook's TLS when no certificate is given: a CA and a serving certificate it signed,
// made at start in memory (EC P-256 with Node's WebCrypto, through `selfsigned`: the
// service images carry no openssl). The CA's certificate is what the webhook registers as
// its caBundle; its key is never written anywhere and is gone with the process.
import { isIP } from "node:net";
import selfsigned from "selfsigned";

export interface WebhookCerts {
  /** The serving certificate (PEM). */
  cert: string;
  /** Its private key (PEM). */
  key: string;
  /** The CA the API server is to trust (PEM): the caBundle. */
  ca: string;
}

const DAY_MS = 24 * 3600 * 1000;

/** A CA and a certificate for `hosts` (DNS names or IP addresses) it signed, valid `days` days. */
export async function makeCerts(hosts: string[], days = 365, now = new Date()): Promise<WebhookCerts> {
  if (!hosts.length) throw new Error("a serving certificate needs at least one host name or address");
  const notBeforeDate = new Date(now.getTime() - 5 * 60_000); // a little clock skew between nodes
  const notAfterDate = new Date(now.getTime() + days * DAY_MS);
  const common = { keyType: "ec" as const, curve: "P-256" as const, algorithm: "sha256", notBeforeDate, notAfterDate };
  const ca = await selfsigned.generate([{ name: "commonName", value: `ephemera-webhook-ca ${now.toISOString()}` }], {
    ...common,
    extensions: [
      { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const serving = await selfsigned.generate([{ name: "commonName", value: hosts[0]! }], {
    ...common,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: hosts.map((h) => (isIP(h) ? { type: 7 as const, ip: h } : { type: 2 as const, value: h })) },
    ],
  });
  return { cert: serving.cert, key: serving.private, ca: ca.cert };
}

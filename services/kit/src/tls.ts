// TLS for the gRPC servers (the public API, the IO context) and their clients, from PEM
// files named in the environment. Files are read once, at start, and a bad one stops the
// service with the variable that names it.
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { envBool, envString, type Env } from "./config.js";
import { errorMessage } from "./errors.js";

/** A server's certificate chain and key (PEM). With `clientCa`, clients must present a certificate it signed (mTLS). */
export interface ServerTls {
  cert: string;
  key: string;
  clientCa?: string;
}

/**
 * A client's TLS: the CA it trusts for the server's certificate (absent: the system's roots),
 * the name it expects on that certificate (absent: the host of the address), and its own
 * certificate and key when the server asks for one (mTLS). PEM text, so it can travel as JSON.
 */
export interface ClientTls {
  ca?: string;
  serverName?: string;
  cert?: string;
  key?: string;
}

/** Reads a PEM file named by `variable`; the error names the variable and the file, never the content. */
export function readPem(variable: string, path: string, what: "CERTIFICATE" | "PRIVATE KEY"): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? errorMessage(err);
    throw new Error(`${variable}: cannot read ${path}: ${why}`, { cause: err });
  }
  // "BEGIN PRIVATE KEY", "BEGIN RSA PRIVATE KEY", "BEGIN EC PRIVATE KEY" all end so.
  if (!new RegExp(`-----BEGIN [A-Z ]*${what}-----`).test(text)) {
    throw new Error(`${variable}: ${path} holds no PEM ${what.toLowerCase()}`);
  }
  return text;
}

/**
 * The server side: EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY (both or neither), and
 * EPHEMERA_TLS_CLIENT_CA to require client certificates. Undefined: plaintext.
 */
export function serverTlsFromEnv(env: Env): ServerTls | undefined {
  const certPath = envString(env, "EPHEMERA_TLS_CERT", "");
  const keyPath = envString(env, "EPHEMERA_TLS_KEY", "");
  const clientCaPath = envString(env, "EPHEMERA_TLS_CLIENT_CA", "");
  if (!certPath && !keyPath) {
    if (clientCaPath) throw new Error("EPHEMERA_TLS_CLIENT_CA needs EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY: client certificates are asked for over TLS only");
    return undefined;
  }
  if (!certPath || !keyPath) throw new Error("EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY go together; one of them is empty");
  const tls: ServerTls = {
    cert: readPem("EPHEMERA_TLS_CERT", certPath, "CERTIFICATE"),
    key: readPem("EPHEMERA_TLS_KEY", keyPath, "PRIVATE KEY"),
    ...(clientCaPath ? { clientCa: readPem("EPHEMERA_TLS_CLIENT_CA", clientCaPath, "CERTIFICATE") } : {}),
  };
  try {
    createSecureContext({ cert: tls.cert, key: tls.key });
  } catch (err) {
    throw new Error(`EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY do not make a usable pair (${certPath}, ${keyPath}): ${errorMessage(err)}`, { cause: err });
  }
  return tls;
}

/**
 * The client side, as the CLI and the runner read it: TLS when EPHEMERA_TLS is true or any of
 * EPHEMERA_TLS_CA, EPHEMERA_TLS_SERVER_NAME, EPHEMERA_TLS_CLIENT_CERT is set. Undefined: plaintext.
 */
export function clientTlsFromEnv(env: Env): ClientTls | undefined {
  const caPath = envString(env, "EPHEMERA_TLS_CA", "");
  const serverName = envString(env, "EPHEMERA_TLS_SERVER_NAME", "");
  const certPath = envString(env, "EPHEMERA_TLS_CLIENT_CERT", "");
  const keyPath = envString(env, "EPHEMERA_TLS_CLIENT_KEY", "");
  if (!certPath !== !keyPath) throw new Error("EPHEMERA_TLS_CLIENT_CERT and EPHEMERA_TLS_CLIENT_KEY go together; one of them is empty");
  const on = envBool(env, "EPHEMERA_TLS", !!(caPath || serverName || certPath));
  if (!on) {
    if (caPath || serverName || certPath) throw new Error("EPHEMERA_TLS is false, but EPHEMERA_TLS_CA, EPHEMERA_TLS_SERVER_NAME or EPHEMERA_TLS_CLIENT_CERT is set");
    return undefined;
  }
  return {
    ...(caPath ? { ca: readPem("EPHEMERA_TLS_CA", caPath, "CERTIFICATE") } : {}),
    ...(serverName ? { serverName } : {}),
    ...(certPath ? { cert: readPem("EPHEMERA_TLS_CLIENT_CERT", certPath, "CERTIFICATE") } : {}),
    ...(keyPath ? { key: readPem("EPHEMERA_TLS_CLIENT_KEY", keyPath, "PRIVATE KEY") } : {}),
  };
}

export function serverCredentials(tls: ServerTls | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  const clientCa = tls.clientCa ? Buffer.from(tls.clientCa) : null;
  return grpc.ServerCredentials.createSsl(clientCa, [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }], !!clientCa);
}

/** A channel's credentials and the options that go with them (the expected server name). */
export function channelCredentials(tls: ClientTls | undefined): { credentials: grpc.ChannelCredentials; options: grpc.ClientOptions } {
  if (!tls) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const pem = (text: string | undefined) => (text ? Buffer.from(text) : null);
  return {
    credentials: grpc.credentials.createSsl(pem(tls.ca), pem(tls.key), pem(tls.cert)),
    options: tls.serverName ? { "grpc.ssl_target_name_override": tls.serverName, "grpc.default_authority": tls.serverName } : {},
  };
}

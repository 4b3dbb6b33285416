// Connecting to NATS: one server or a cluster's, with the credentials NATS_* configure.
import { connect } from "@nats-io/transport-node";
import { credsAuthenticator, nkeyAuthenticator, type ConnectionOptions, type NatsConnection } from "@nats-io/nats-core";
import { readFileSync } from "node:fs";
import { UnavailableError, errorMessage, redactUrl, type NatsAuth } from "@ephemera/kit";

/**
 * `url`: one server, or a NATS cluster's servers separated by commas
 * (`nats://n1:4222,nats://n2:4222`): the client picks one and moves to another when it goes.
 */
export async function connectNats(url: string, name: string, auth?: NatsAuth): Promise<NatsConnection> {
  const credentials = natsCredentials(auth);
  try {
    // Reconnects for ever (a server paused or restarted for any length of time): the
    // connection only closes when the service drains it on shutdown. No async traces: each
    // request would otherwise make (and capture the stack of) an error it almost never throws,
    // which a CPU profile put at 0.5 ms of a runner's work per step; a failed request still
    // says what failed.
    return await connect({
      servers: natsServers(url), name, maxReconnectAttempts: -1, reconnectTimeWait: 500, waitOnFirstConnect: false, noAsyncTraces: true, ...credentials,
    });
  } catch (err) {
    // The cause names the server's refusal ("Authorization Violation"), never the credentials.
    throw new UnavailableError(`cannot connect to NATS at ${natsServers(url).map(redactUrl).join(",")}${auth ? ` (as ${describeNatsAuth(auth)})` : ""}: ${errorMessage(err)}`, { cause: err });
  }
}

/** The servers of a NATS_URL: the client takes a string as one server, so a list is split here. */
export function natsServers(url: string): string[] {
  return url.split(",").map((s) => s.trim()).filter(Boolean);
}

/** The connection options of a way of authenticating; a seed or creds file is read once, here. */
function natsCredentials(auth: NatsAuth | undefined): Partial<ConnectionOptions> {
  if (!auth) return {};
  const file = (path: string, what: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`${what} ${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`, { cause: err });
    }
  };
  switch (auth.kind) {
    case "user": return { user: auth.user, pass: auth.pass };
    case "token": return { token: auth.token };
    case "nkey": return { authenticator: nkeyAuthenticator(new TextEncoder().encode(file(auth.seedFile, "NATS_NKEY").toString("utf8").trim())) };
    case "creds": return { authenticator: credsAuthenticator(new Uint8Array(file(auth.credsFile, "NATS_CREDS"))) };
  }
}

const describeNatsAuth = (auth: NatsAuth) =>
  auth.kind === "user" ? `user ${auth.user}` : auth.kind === "token" ? "a token" : auth.kind === "nkey" ? `the nkey in ${auth.seedFile}` : `the credentials in ${auth.credsFile}`;

// What every command gets: the caller's streams and environment, and the API client,
// loaded and created on first use so `--help` and `schema` neither load gRPC nor open a
// connection.
import type { ClientTls } from "@ephemera/kit/client";
import type { Api } from "./api.js";
import { UsageError } from "./errors.js";

export const DEFAULT_API = "127.0.0.1:7400";

export interface Writer {
  write(chunk: string | Uint8Array): unknown;
}

/** The process around the program, passed in so tests can run `eph` in-process. */
export interface Io {
  env: Record<string, string | undefined>;
  stdout: Writer;
  stderr: Writer;
  /** Standard input, read whole (for `-f -`). */
  stdin?: () => Promise<Uint8Array>;
  /** Ends long-running commands (`events --follow`, `--wait`, `local connect --foreground`). */
  signal?: AbortSignal;
  /** How to start `eph` itself (node and its script): `local connect` runs its daemon so. */
  self?: string[];
}

/** The connection options of the command line, each with the variable it stands for. */
export interface ConnectionOptions {
  api?: string;
  token?: string;
  tls?: boolean;
  tlsCa?: string;
  tlsServerName?: string;
  tlsCert?: string;
  tlsKey?: string;
}

const TLS_FLAGS = [
  ["tlsCa", "--tls-ca", "EPHEMERA_TLS_CA"],
  ["tlsServerName", "--tls-server-name", "EPHEMERA_TLS_SERVER_NAME"],
  ["tlsCert", "--tls-cert", "EPHEMERA_TLS_CLIENT_CERT"],
  ["tlsKey", "--tls-key", "EPHEMERA_TLS_CLIENT_KEY"],
] as const;

export class Context {
  /** `--api` or EPHEMERA_API; fixed once the command line is parsed. */
  address: string;
  /** `--token` or EPHEMERA_TOKEN. */
  token: string | undefined;
  private tlsEnv: Record<string, string | undefined>;
  /** Flags given, by the variable they stand for: errors name the flag. */
  private readonly flags = new Map<string, string>();
  /** What the command exits with when it ends without an error (get-status's answer). */
  exitCode = 0;
  /** The exit code is the command's answer (get-status): an error must not exit with one that reads as an answer. */
  answering = false;
  private client: Promise<Api> | undefined;
  private opened: Api | undefined;

  constructor(readonly io: Io) {
    this.address = io.env["EPHEMERA_API"] || DEFAULT_API;
    this.token = io.env["EPHEMERA_TOKEN"] || undefined;
    this.tlsEnv = io.env;
  }

  /** The global options, once parsed: they win over the environment. */
  connect(options: ConnectionOptions): void {
    if (options.api) this.address = options.api;
    if (options.token) this.token = options.token;
    const env: Record<string, string | undefined> = { ...this.io.env };
    if (options.tls) {
      env["EPHEMERA_TLS"] = "true";
      this.flags.set("EPHEMERA_TLS", "--tls");
    }
    for (const [key, flag, variable] of TLS_FLAGS) {
      const value = options[key];
      if (value === undefined) continue;
      env[variable] = value;
      this.flags.set(variable, flag);
    }
    this.tlsEnv = env;
  }

  /** TLS to the API, from the flags and the environment; a file that cannot be used is bad usage. */
  private tls(clientTlsFromEnv: (env: Record<string, string | undefined>) => ClientTls | undefined): ClientTls | undefined {
    try {
      return clientTlsFromEnv(this.tlsEnv);
    } catch (err) {
      let message = (err as Error).message;
      for (const [variable, flag] of this.flags) message = message.replaceAll(variable, `${flag} (${variable})`);
      throw new UsageError(message, { cause: err });
    }
  }

  /** The API client, the gRPC stack loaded with it: only commands that call the API pay for it. */
  api(): Promise<Api> {
    this.client ??= this.open();
    return this.client;
  }

  private async open(): Promise<Api> {
    const [{ Api }, { clientTlsFromEnv, isLoopback }] = await Promise.all([import("./api.js"), import("@ephemera/kit/client")]);
    const tls = this.tls(clientTlsFromEnv);
    // A token sent in plaintext to another machine can be read on the way.
    if (this.token && !tls && !isLoopback(this.address)) {
      this.err(`warning: sending the token to ${this.address} without TLS (set EPHEMERA_TLS_CA or --tls)`);
    }
    this.opened = new Api(this.address, { ...(this.token ? { token: this.token } : {}), ...(tls ? { tls } : {}) });
    return this.opened;
  }

  /** Output (stdout): the command's result. */
  out(text: string | Uint8Array): void {
    this.io.stdout.write(text);
  }

  /** One line of progress or diagnostics (stderr). */
  err(line: string): void {
    this.io.stderr.write(`${line}\n`);
  }

  close(): void {
    this.opened?.close();
  }
}

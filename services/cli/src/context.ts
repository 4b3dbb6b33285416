// What every command gets: the caller's streams and environment, and the API client,
// created on first use so `--help` and `schema` never open a connection.
import { Api, DEFAULT_API } from "./api.js";

export interface Writer {
  write(chunk: string | Uint8Array): unknown;
}

/** The process around the program, passed in so tests can run `eph` in-process. */
export interface Io {
  env: Record<string, string | undefined>;
  stdout: Writer;
  stderr: Writer;
  /** Standard input, read whole (for `-f -`). */
  stdin?: () => Promise<string>;
  /** Ends long-running commands (`events --follow`, `--wait`). */
  signal?: AbortSignal;
}

export class Context {
  /** `--api` or EPHEMERA_API; fixed once the command line is parsed. */
  address: string;
  private client: Api | undefined;

  constructor(readonly io: Io) {
    this.address = io.env["EPHEMERA_API"] || DEFAULT_API;
  }

  api(): Api {
    this.client ??= new Api(this.address);
    return this.client;
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
    this.client?.close();
  }
}

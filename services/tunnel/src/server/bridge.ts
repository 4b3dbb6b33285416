// One TCP connection carried over one HTTP/2 stream, either way: bytes piped both ways with
// backpressure and counted, a half-close passed on, and an end on either side ending the
// other. `destroy` ends both at once: a session that ends takes its connections with it
// (left alone, a socket whose stream is gone kept the process busy and growing).
import { constants, type ServerHttp2Stream } from "node:http2";
import type { Socket } from "node:net";

export interface BridgeEnd {
  /** socket → stream: the cluster's side to the workstation. */
  bytesToWorkstation: number;
  /** stream → socket. */
  bytesToCluster: number;
  startedAt: Date;
  endedAt: Date;
  /** Empty when both sides ended cleanly. */
  error: string;
}

export interface Bridge {
  /** Ends both sides now; `reason` becomes the end's error. */
  destroy(reason: string): void;
  bytes(): { toWorkstation: number; toCluster: number };
}

/** Joins `socket` and `stream` (whose response has been started); `onEnd` is called once, when both are closed. */
export function bridge(socket: Socket, stream: ServerHttp2Stream, onEnd: (end: BridgeEnd) => void): Bridge {
  const startedAt = new Date();
  let toWorkstation = 0;
  let toCluster = 0;
  let error = "";
  let closed = 0;
  const fail = (why: string) => {
    error ||= why;
    socket.destroy();
    if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
  };
  const sideClosed = () => {
    if (++closed < 2) return;
    onEnd({ bytesToWorkstation: toWorkstation, bytesToCluster: toCluster, startedAt, endedAt: new Date(), error });
  };
  socket.on("data", (chunk: Buffer) => { toWorkstation += chunk.length; });
  stream.on("data", (chunk: Buffer) => { toCluster += chunk.length; });
  socket.pipe(stream);
  stream.pipe(socket);
  socket.once("error", (err: NodeJS.ErrnoException) => fail(`the cluster side failed: ${err.code ?? err.message}`));
  stream.once("error", (err: NodeJS.ErrnoException) => fail(`the stream failed: ${err.code ?? err.message}`));
  stream.once("aborted", () => fail("the workstation reset the stream"));
  socket.once("close", () => {
    // The socket is gone both ways: once what it sent is flushed, the stream has nothing more to carry.
    if (!stream.destroyed) {
      if (stream.writableFinished) stream.close(constants.NGHTTP2_NO_ERROR);
      else stream.once("finish", () => stream.close(constants.NGHTTP2_NO_ERROR));
    }
    sideClosed();
  });
  stream.once("close", () => {
    if (stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_NO_ERROR) fail(`the stream was reset (${stream.rstCode})`);
    else socket.destroySoon();
    sideClosed();
  });
  return {
    destroy: fail,
    bytes: () => ({ toWorkstation, toCluster }),
  };
}

// gRPC for clients of ephemera's services: channel options, deadline-bound unary calls
// whose failures come back as named errors, and health checks. Nothing of the server side.
import * as grpc from "@grpc/grpc-js";
import { MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, fromServiceError } from "./grpc-status.js";
import { channelCredentials, type ClientTls } from "./tls.js";

export const clientOptions: grpc.ClientOptions = {
  "grpc.max_receive_message_length": MAX_RESPONSE_BYTES,
  "grpc.max_send_message_length": MAX_REQUEST_BYTES,
};

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;

/** Calls a unary method with a deadline; failures come back as named errors. */
export function call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, timeoutMs = 10_000, metadata = new grpc.Metadata()): Promise<Res> {
  return new Promise((resolve, reject) => {
    method(request, metadata, { deadline: Date.now() + timeoutMs }, (err, res) =>
      err ? reject(fromServiceError(err)) : resolve(res),
    );
  });
}

const HealthClient = grpc.makeGenericClientConstructor({
  check: {
    path: "/grpc.health.v1.Health/Check",
    requestStream: false,
    responseStream: false,
    requestSerialize: (v: Buffer) => v,
    requestDeserialize: (v: Buffer) => v,
    responseSerialize: (v: Buffer) => v,
    responseDeserialize: (v: Buffer) => v,
  },
}, "Health");

/**
 * One gRPC health check of the whole server: true when it answers SERVING (field 1 = 1) within
 * the deadline. A server on TLS is checked with the client TLS given.
 */
export function checkHealth(address: string, deadlineMs = 1000, tls?: ClientTls): Promise<boolean> {
  const { credentials, options } = channelCredentials(tls);
  const client = new HealthClient(address, credentials, options);
  return new Promise<boolean>((resolve) => {
    client.makeUnaryRequest("/grpc.health.v1.Health/Check", (v: Buffer) => v, (v: Buffer) => v, Buffer.alloc(0),
      { deadline: Date.now() + deadlineMs }, (err, res?: Buffer) => resolve(!err && !!res && res[0] === 0x08 && res[1] === 0x01));
  }).finally(() => client.close());
}

export { grpc };

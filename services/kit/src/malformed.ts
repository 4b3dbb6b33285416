// A request that cannot be decoded is the caller's mistake: INVALID_ARGUMENT, not the
// INTERNAL grpc-js answers when a deserializer throws. Each method's deserializer is
// wrapped to hand a marker to its handler, which answers the status itself.
import * as grpc from "@grpc/grpc-js";
import { errorMessage } from "./errors.js";

const MALFORMED = Symbol("malformed request");
type Malformed = { [MALFORMED]: string };
const isMalformed = (r: unknown): r is Malformed => typeof r === "object" && r !== null && MALFORMED in r;

type Binding = { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation };

export function tolerateMalformed(binding: Binding): Binding {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const [name, method] of Object.entries(binding.definition)) {
    definition[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return method.requestDeserialize(bytes);
        } catch (err) {
          return { [MALFORMED]: errorMessage(err) } satisfies Malformed;
        }
      },
    };
    const handler = binding.implementation[name] as ((call: { request: unknown }, callback?: grpc.sendUnaryData<unknown>) => void) | undefined;
    if (!handler) continue;
    const refuse = (request: Malformed) => ({ code: grpc.status.INVALID_ARGUMENT, details: `malformed ${name} request: ${request[MALFORMED]}` });
    implementation[name] = ((call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>, callback?: grpc.sendUnaryData<unknown>) => {
      if (!method.requestStream && isMalformed(call.request)) {
        if (callback) return callback(refuse(call.request));
        return (call as grpc.ServerWritableStream<unknown, unknown>).emit("error", refuse(call.request));
      }
      return handler(call, callback);
    }) as grpc.UntypedHandleCall;
  }
  return { definition: definition as grpc.ServiceDefinition, implementation };
}

// A request that cannot be decoded is the caller's mistake: INVALID_ARGUMENT, not the
// INTERNAL grpc-js answers when a deserializer throws. Each method's deserializer is
// wrapped to hand a marker to its handler, which answers the status itself. Text that is
// not UTF-8 is refused the same way, field by field, before the generated decoder would
// replace a bad byte with U+FFFD and let the request be stored so.
import type { DescMessage } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { ValidationError, errorMessage } from "./errors.js";
import { toServiceError } from "./grpc-status.js";
import { invalidStrings } from "./wire-strings.js";

const MALFORMED = Symbol("malformed request");
type Malformed = { [MALFORMED]: string | ValidationError };
const isMalformed = (r: unknown): r is Malformed => typeof r === "object" && r !== null && MALFORMED in r;

type Binding = { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation };

/** `requestTypes` (by gRPC path, see wire-strings.ts) names the methods whose string fields are checked. */
export function tolerateMalformed(binding: Binding, requestTypes: ReadonlyMap<string, DescMessage> = new Map()): Binding {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const [name, method] of Object.entries(binding.definition)) {
    const type = requestTypes.get(method.path);
    definition[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          const violations = type ? invalidStrings(bytes, type) : [];
          if (violations.length > 0) {
            const refused = new ValidationError(violations, `the ${name} request holds text that is not UTF-8`);
            return { [MALFORMED]: refused } satisfies Malformed;
          }
          return method.requestDeserialize(bytes);
        } catch (err) {
          return { [MALFORMED]: errorMessage(err) } satisfies Malformed;
        }
      },
    };
    const handler = binding.implementation[name] as ((call: { request: unknown }, callback?: grpc.sendUnaryData<unknown>) => void) | undefined;
    if (!handler) continue;
    const refuse = ({ [MALFORMED]: why }: Malformed) => typeof why === "string"
      ? { code: grpc.status.INVALID_ARGUMENT, details: `malformed ${name} request: ${why}` }
      : toServiceError(why);
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

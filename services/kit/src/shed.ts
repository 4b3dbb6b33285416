// Load shedding: past a bound on the requests a server handles at once, or for a request
// whose deadline has already passed, answer RESOURCE_EXHAUSTED at once, so a busy server
// says so instead of letting every caller's deadline run out.
import * as grpc from "@grpc/grpc-js";

type Binding = { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation };
type AnyCall = { getDeadline(): grpc.Deadline; emit(event: "error", err: unknown): boolean };

export interface Shedder {
  /** Requests being handled now. */
  readonly inFlight: number;
  wrap(binding: Binding): Binding;
}

export function loadShedder(maxInFlight: number): Shedder {
  let inFlight = 0;
  const busy = (why: string) => ({ code: grpc.status.RESOURCE_EXHAUSTED, details: `the server is busy: ${why}; try again shortly` });
  return {
    get inFlight() { return inFlight; },
    wrap: (binding) => {
      const implementation: grpc.UntypedServiceImplementation = {};
      for (const [name, handler] of Object.entries(binding.implementation)) {
        const method = binding.definition[name];
        // Streams (watches) stay open for long: they are not counted.
        if (!method || method.responseStream || method.requestStream) { implementation[name] = handler; continue; }
        implementation[name] = ((call: AnyCall, callback: grpc.sendUnaryData<unknown>) => {
          const deadline = call.getDeadline();
          const ms = deadline instanceof Date ? deadline.getTime() : Number(deadline);
          if (Number.isFinite(ms) && ms <= Date.now()) return callback(busy("the request's deadline passed before it was handled"));
          if (inFlight >= maxInFlight) return callback(busy(`${inFlight} requests are being handled`));
          inFlight++;
          let done = false;
          const release = () => { if (!done) { done = true; inFlight--; } };
          (handler as (c: AnyCall, cb: grpc.sendUnaryData<unknown>) => void)(call, (err, value, trailer, flags) => {
            release();
            callback(err, value, trailer, flags);
          });
        }) as grpc.UntypedHandleCall;
      }
      return { definition: binding.definition, implementation };
    },
  };
}

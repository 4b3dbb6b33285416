// gRPC calls counted by method and status code, and unary calls timed: a server interceptor
// (every registered method, the load shedder's and the malformed-request refusals included;
// an unknown method never reaches it, so the labels stay bounded) and its client twin.
import * as grpc from "@grpc/grpc-js";
import { Counter, Histogram, LATENCY_BUCKETS, type Registry } from "./registry.js";

const LABELS = ["grpc_service", "method", "code"] as const;

/** `/ephemera.v1.SandboxService/ApplySandbox` → `ephemera.v1.SandboxService`, `ApplySandbox`. */
function names(path: string): { grpc_service: string; method: string } {
  const [, service = "", method = ""] = path.split("/");
  return { grpc_service: service, method };
}

const codeName = (code: number) => grpc.status[code] ?? String(code);

export function grpcServerMetrics(registry: Registry): grpc.ServerInterceptor {
  const handled = new Counter({
    name: "ephemera_grpc_server_requests_total", labelNames: LABELS, registers: [registry],
    help: "gRPC calls answered by this server, by method and status code (a stream counts when it ends)",
  });
  const seconds = new Histogram({
    name: "ephemera_grpc_server_request_duration_seconds", labelNames: ["grpc_service", "method"], buckets: LATENCY_BUCKETS, registers: [registry],
    help: "Time from a unary call's arrival to its status (streams are left out: a watch lasts as long as its client wants)",
  });
  return (descriptor, call) => {
    const labels = names(descriptor.path);
    const unary = !descriptor.requestStream && !descriptor.responseStream;
    const started = performance.now();
    let ended = false;
    const end = (code: number) => {
      if (ended) return;
      ended = true;
      handled.inc({ ...labels, code: codeName(code) });
      if (unary) seconds.observe(labels, (performance.now() - started) / 1000);
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) => next({ onCancel: () => end(grpc.status.CANCELLED) }),
      sendStatus: (status, next) => { end(status.code); next(status); },
    });
  };
}

/** Calls this client made, by method and the status they ended with, and how long unary calls took. */
export function grpcClientMetrics(registry: Registry): grpc.Interceptor {
  const made = new Counter({
    name: "ephemera_grpc_client_requests_total", labelNames: LABELS, registers: [registry],
    help: "gRPC calls this service made, by method and the status code they ended with",
  });
  const seconds = new Histogram({
    name: "ephemera_grpc_client_request_duration_seconds", labelNames: ["grpc_service", "method"], buckets: LATENCY_BUCKETS, registers: [registry],
    help: "Time from a unary call's start to its status, at the caller",
  });
  return (options, nextCall) => {
    const labels = names(options.method_definition.path);
    const unary = !options.method_definition.requestStream && !options.method_definition.responseStream;
    const started = performance.now();
    return new grpc.InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => next(metadata, {
        onReceiveStatus: (status, nextStatus) => {
          made.inc({ ...labels, code: codeName(status.code) });
          if (unary) seconds.observe(labels, (performance.now() - started) / 1000);
          nextStatus(status);
        },
      }),
    });
  };
}

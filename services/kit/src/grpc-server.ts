// gRPC for ephemera's services: a server with health checking, reflection, load shedding and
// size bounds, and the adapter from async handlers to unary calls with mapped errors.
import * as grpc from "@grpc/grpc-js";
import { loadFileDescriptorSetFromBuffer } from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation } from "grpc-health-check";
import { descriptorSetBase64 } from "@ephemera/proto";
import { EphemeraError } from "./errors.js";
import { MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, toServiceError } from "./grpc-status.js";
import type { Logger } from "./logger.js";
import { tolerateMalformed } from "./malformed.js";
import { loadShedder } from "./shed.js";
import { serverCredentials, type ServerTls } from "./tls.js";
import { requestTypes } from "./wire-strings.js";

/**
 * The request types of every method, by path (for the UTF-8 check of each request's text),
 * made once per process: decoding the descriptor set took 90-210 ms a server.
 */
let types: ReturnType<typeof requestTypes> | undefined;
const requestTypesOnce = () => (types ??= requestTypes(Buffer.from(descriptorSetBase64, "base64")));

/**
 * Server reflection (v1 and v1alpha), whose index of the whole descriptor set (about 0.5 s
 * and 20 MB to build) is made at the first reflection call, not at every start: only tools
 * such as grpcurl ask for it. The services' definitions come from a reflection service of
 * no files, which costs only the reflection protos.
 */
type StreamHandler = (stream: grpc.ServerDuplexStream<unknown, unknown>) => void;
let reflectionDefinitions: grpc.ServiceDefinition[] | undefined;
let reflectionHandlers: Map<string, StreamHandler> | undefined;
function handlersOf(reflection: ReflectionService): Array<[grpc.ServiceDefinition, Map<string, StreamHandler>]> {
  const added: Array<[grpc.ServiceDefinition, Map<string, StreamHandler>]> = [];
  reflection.addToServer({
    addService: (definition, implementation) => {
      const byPath = new Map<string, StreamHandler>();
      for (const [name, method] of Object.entries(definition)) byPath.set(method.path, implementation[name] as StreamHandler);
      added.push([definition, byPath]);
    },
  });
  return added;
}
function addReflection(server: grpc.Server): void {
  reflectionDefinitions ??= handlersOf(new ReflectionService({})).map(([definition]) => definition);
  const described = (path: string): StreamHandler => {
    reflectionHandlers ??= new Map(handlersOf(new ReflectionService(loadFileDescriptorSetFromBuffer(Buffer.from(descriptorSetBase64, "base64"))))
      .flatMap(([, byPath]) => [...byPath]));
    return reflectionHandlers.get(path)!;
  };
  for (const definition of reflectionDefinitions) {
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const [name, method] of Object.entries(definition)) implementation[name] = ((stream: grpc.ServerDuplexStream<unknown, unknown>) => described(method.path)(stream)) as grpc.UntypedHandleCall;
    server.addService(definition, implementation);
  }
}

/** Unary requests a server handles at once before it answers RESOURCE_EXHAUSTED. */
export const MAX_IN_FLIGHT = 256;

export interface ServiceBinding {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
}

export interface RunningServer {
  /** The port bound (useful when listening on port 0). */
  port: number;
  health: HealthImplementation;
  /** SERVING or NOT_SERVING for the whole server; ignored once shutting down. */
  setServing(serving: boolean): void;
  shutdown(): Promise<void>;
}

/** Something a service depends on that can be lost for a while (e.g. its NATS connection). */
export interface HealthSource {
  readonly healthy: boolean;
  /** Called on each change; returns an unsubscribe function. */
  onChange(listener: (healthy: boolean) => void): () => void;
}

/**
 * Reports the server NOT_SERVING while any source is unhealthy and SERVING again once all
 * are back: a service riding out an outage stays up but tells its health checks it is degraded.
 */
export function followHealth(server: RunningServer, sources: HealthSource[]): () => void {
  const update = () => server.setServing(sources.every((s) => s.healthy));
  const unsubscribe = sources.map((s) => s.onChange(update));
  update();
  return () => { for (const u of unsubscribe) u(); };
}

export interface GrpcServerOptions {
  maxInFlight?: number;
  /** Serve over TLS (and ask for client certificates when it has a client CA); absent: plaintext. */
  tls?: ServerTls;
  /** Run on every call of a registered method (kit/metrics' grpcServerMetrics counts and times them). */
  interceptors?: grpc.ServerInterceptor[];
}

export async function startGrpcServer(
  listen: string,
  services: ServiceBinding[],
  logger: Logger,
  options: GrpcServerOptions = {},
): Promise<RunningServer> {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": MAX_REQUEST_BYTES,
    "grpc.max_send_message_length": MAX_RESPONSE_BYTES,
    interceptors: options.interceptors ?? [],
  });
  const shedder = loadShedder(options.maxInFlight ?? MAX_IN_FLIGHT);
  const types = requestTypesOnce();
  for (const s of services.map((b) => tolerateMalformed(b, types)).map(shedder.wrap)) {
    server.addService(s.definition, s.implementation);
  }
  const health = new HealthImplementation({ "": "SERVING" });
  health.addToServer(server);
  addReflection(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(listen, serverCredentials(options.tls), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const transport = !options.tls ? "plaintext" : options.tls.clientCa ? "mtls" : "tls";
  logger.info({ listen, port, transport }, "grpc listening");
  let shuttingDown = false;
  return {
    port,
    health,
    setServing: (serving) => { if (!shuttingDown) health.setStatus("", serving ? "SERVING" : "NOT_SERVING"); },
    shutdown: () =>
      new Promise<void>((resolve) => {
        shuttingDown = true;
        health.setStatus("", "NOT_SERVING");
        const force = setTimeout(() => server.forceShutdown(), 5000);
        server.tryShutdown(() => { clearTimeout(force); resolve(); });
      }),
  };
}

/** Adapts an async function to a grpc-js unary handler, mapping errors to statuses. */
export function unary<Req, Res>(
  fn: (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>,
  logger?: Logger,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    fn(call.request, call).then(
      (res) => callback(null, res),
      (err: unknown) => {
        if (!(err instanceof EphemeraError)) logger?.error({ err }, "request failed");
        callback(toServiceError(err), null);
      },
    );
  };
}

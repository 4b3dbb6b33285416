// Every gRPC piece of the kit, both sides: what services import. A client that must start
// fast imports `@ephemera/kit/client` instead, which leaves the server side out.
export * from "./grpc-status.js";
export * from "./grpc-client.js";
export * from "./grpc-server.js";

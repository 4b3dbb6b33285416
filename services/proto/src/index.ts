// The wire types of ephemera, generated from proto/ (pnpm gen). Import from here only.
export * from "./gen/ephemera/v1/spec.js";
export * from "./gen/ephemera/v1/events.js";
export * from "./gen/ephemera/v1/api.js";
export * from "./gen/ephemera/v1/iocontext.js";
export * from "./gen/ephemera/v1/jobs.js";
export { BadRequest, BadRequest_FieldViolation, Status as RpcStatus } from "./gen/google/rpc/error_details.js";
export { Any } from "./gen/google/protobuf/any.js";
export { descriptorSetBase64 } from "./gen/descriptors.js";
export * as routes from "./gen/routes/routes.js";
export { apiClients, type ApiClients } from "./clients.js";

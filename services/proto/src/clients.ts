// The public API's clients, every one on a single channel: what a command line or the console
// holds to call the API.
import type { ChannelCredentials, ClientOptions } from "@grpc/grpc-js";
import * as api from "./gen/ephemera/v1/api.js";

export interface ApiClients {
  access: api.AccessServiceClient;
  plugins: api.ResourcePluginServiceClient;
  sandboxes: api.SandboxServiceClient;
  routeGroups: api.RouteGroupServiceClient;
  jobRunnerGroups: api.JobRunnerGroupServiceClient;
  jobs: api.JobServiceClient;
  logs: api.LogServiceClient;
  artifacts: api.ArtifactServiceClient;
  events: api.EventServiceClient;
}

/** Every client of the public API at `address`, sharing the first one's channel (closing one closes it). */
export function apiClients(address: string, credentials: ChannelCredentials, options: ClientOptions): ApiClients {
  const access = new api.AccessServiceClient(address, credentials, options);
  const shared = { channelOverride: access.getChannel() };
  return {
    access,
    plugins: new api.ResourcePluginServiceClient(address, credentials, shared),
    sandboxes: new api.SandboxServiceClient(address, credentials, shared),
    routeGroups: new api.RouteGroupServiceClient(address, credentials, shared),
    jobRunnerGroups: new api.JobRunnerGroupServiceClient(address, credentials, shared),
    jobs: new api.JobServiceClient(address, credentials, shared),
    logs: new api.LogServiceClient(address, credentials, shared),
    artifacts: new api.ArtifactServiceClient(address, credentials, shared),
    events: new api.EventServiceClient(address, credentials, shared),
  };
}

// The facade's JSON (ts-proto toJSON of api.proto messages): default values are omitted,
// so every field is optional here and read through the defaults the pages apply.

export interface WhoAmI { name?: string; role?: string; open?: boolean }

export interface SandboxRow {
  name: string;
  cluster?: string;
  ready?: boolean;
  status?: string;
  message?: string;
  labels?: Record<string, string>;
  createdAt?: string;
  ttl?: string;
  scheduledDeleteTime?: string;
  routingKey?: string;
  resources?: number;
}

export interface SandboxList { total?: number; sandboxes?: SandboxRow[]; statuses?: Record<string, number> }

export interface EndpointUrl { name?: string; target?: string; url?: string; baselineUrl?: string }

export interface StepAttempt {
  attempt?: number;
  runId?: string;
  status?: string;
  reason?: string;
  exitCode?: number;
  queuedAt?: string;
  startedAt?: string;
  endedAt?: string;
}

export interface StepView {
  name: string;
  phase?: string;
  status?: string;
  attempt?: number;
  runId?: string;
  exitCode?: number;
  reason?: string;
  message?: string;
  attempts?: StepAttempt[];
  dependsOn?: string[];
}

export interface StepFailure { step?: string; runId?: string; exitCode?: number; reason?: string; message?: string; logTail?: string }

export interface ResourceView {
  name: string;
  plugin?: string;
  version?: string;
  status?: string;
  outputs?: { key?: string; size?: number }[];
  steps?: StepView[];
  failure?: StepFailure;
}

export interface WorkloadView { kind?: string; name?: string; status?: string; message?: string; workload?: string; hosts?: string[] }

export interface SandboxView {
  name: string;
  routingKey?: string;
  spec?: {
    cluster?: string;
    description?: string;
    labels?: Record<string, string>;
    ttl?: { duration?: string; offsetFrom?: string };
    resources?: { name?: string; plugin?: string; params?: Record<string, string> }[];
  };
  status?: { ready?: boolean; reason?: string; message?: string; scheduledDeleteTime?: string };
  endpoints?: EndpointUrl[];
  resources?: ResourceView[];
  createdAt?: string;
  updatedAt?: string;
  workloads?: WorkloadView[];
  renderError?: string;
}

export interface OutputValue { resource?: string; key?: string; size?: number; value?: string }

export interface PluginStep {
  name?: string;
  inputs?: { name?: string; valueFromSandbox?: boolean; valueFromStep?: { name?: string; output?: string }; as?: { env?: string; path?: string }; type?: string }[];
  outputs?: { name?: string; valueFromPath?: string; description?: string; type?: string }[];
  script?: string;
  timeout?: string;
  retries?: number;
}

export interface PluginVersion {
  name?: string;
  version?: string;
  spec?: { description?: string; runner?: { image?: string; namespace?: string }; create?: PluginStep[]; delete?: PluginStep[] };
  digest?: string;
  createdAt?: string;
  sandboxes?: string[];
  deleting?: boolean;
}

export interface Graph { nodes?: { name: string; inputs?: string[]; outputs?: string[] }[]; edges?: { from: string; to: string; label?: string }[] }

export interface PluginDetail { plugin?: PluginVersion; graphs?: { create?: Graph; delete?: Graph } }

export interface EphemeraEvent {
  id?: string;
  type?: string;
  source?: string;
  subject?: string;
  time?: string;
  data?: Record<string, unknown>;
  seq?: number;
  sequence?: number;
  [key: string]: unknown;
}

export interface RouteGroupView {
  name: string;
  routingKey?: string;
  spec?: { cluster?: string; description?: string; match?: unknown; endpoints?: { name?: string; target?: string }[] };
  status?: { ready?: boolean; reason?: string; message?: string };
  endpoints?: EndpointUrl[];
  sandboxes?: { name?: string; routingKey?: string; ready?: boolean; routed?: string[] }[];
  conflicts?: { baseline?: string; sandboxes?: string[] }[];
  createdAt?: string;
  updatedAt?: string;
}

export interface JobView {
  name: string;
  spec?: { runnerGroup?: string; namePrefix?: string; script?: string; command?: string[]; labels?: Record<string, string> };
  submitter?: string;
  routingKey?: string;
  status?: {
    state?: string; pod?: string; exitCode?: number; reason?: string; message?: string;
    queuedAt?: string; startedAt?: string; endedAt?: string;
    artifacts?: { path?: string; size?: number | string; sha256?: string; meta?: Record<string, string> }[];
  };
}

export interface JobRunnerGroupView {
  name: string;
  spec?: { cluster?: string; namespace?: string; image?: string; jobTimeout?: string; labels?: Record<string, string>; scaling?: { manual?: { desiredPods?: number } } };
  status?: { ready?: boolean; reason?: string; message?: string; desiredPods?: number; readyPods?: number; pods?: string[] };
  createdAt?: string;
}

// The agents' side of the IOContext service: fetch a step's inputs, store its outputs.
import { call, grpc } from "@ephemera/kit";
import * as pb from "@ephemera/proto";

export function ioContextClient(address: string): pb.IOContextClient {
  return new pb.IOContextClient(address, grpc.credentials.createInsecure());
}

export function fetchStepInputs(
  client: pb.IOContextClient, runId: string, token: string, timeoutMs = 15_000,
): Promise<pb.GetStepInputsResponse> {
  return call(client.getStepInputs.bind(client), { runId, token }, timeoutMs);
}

export async function storeStepOutputs(
  client: pb.IOContextClient, runId: string, token: string, outputs: pb.OutputValue[], timeoutMs = 15_000,
): Promise<void> {
  await call(client.putStepOutputs.bind(client), { runId, token, outputs }, timeoutMs);
}

export async function fetchStepOutputs(
  client: pb.IOContextClient, runId: string, token: string, timeoutMs = 15_000,
): Promise<pb.OutputValue[]> {
  return (await call(client.getStepOutputs.bind(client), { runId, token }, timeoutMs)).outputs;
}

// Every service's gRPC server answers health checks and reflection, and maps named
// errors to statuses that clients turn back into the same errors.
import { dirname, join } from "node:path";
import { loadSync } from "@grpc/proto-loader";
import * as pb from "@ephemera/proto";
import { ConflictError, NotFoundError, PermissionDeniedError, UnauthenticatedError, UnavailableError, ValidationError } from "./errors.js";
import { call, clientOptions, fromServiceError, grpc, startGrpcServer, unary, type RunningServer } from "./grpc.js";
import { waitFor } from "./wait.js";
import { createLogger } from "./logger.js";

const reflectionProto = join(dirname(require.resolve("@grpc/reflection")), "..", "proto/grpc/reflection/v1/reflection.proto");
const healthProto = join(dirname(require.resolve("grpc-health-check/package.json")), "proto/health/v1/health.proto");
type Loaded = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const load = (file: string) => grpc.loadPackageDefinition(loadSync(file, { keepCase: true, enums: String })) as Loaded;

describe("gRPC server plumbing", () => {
  let server: RunningServer;
  let failWith: Error;
  const address = () => `127.0.0.1:${server.port}`;

  beforeAll(async () => {
    const plugins: Partial<pb.ResourcePluginServiceServer> = {
      get: unary(async () => { throw failWith; }),
    };
    server = await startGrpcServer("127.0.0.1:0", [
      { definition: pb.ResourcePluginServiceService, implementation: plugins as grpc.UntypedServiceImplementation },
    ], createLogger("test", "silent"));
  });
  afterAll(async () => { await server.shutdown(); });

  it("answers a request it cannot decode with INVALID_ARGUMENT, not INTERNAL", async () => {
    // Bytes that are not a GetResourcePluginRequest (a length-delimited field running past the end).
    const garbage = Buffer.from([0x0a, 0xff, 0x01, 0x02]);
    const client = new grpc.Client(address(), grpc.credentials.createInsecure());
    const err = await new Promise<grpc.ServiceError>((resolve, reject) => client.makeUnaryRequest(
      "/ephemera.v1.ResourcePluginService/Get", (b: Buffer) => b, (b: Buffer) => b, garbage, { deadline: Date.now() + 2000 },
      (e) => (e ? resolve(e) : reject(new Error("a malformed request was accepted"))),
    ));
    client.close();
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain("malformed get request");
  });

  it("refuses a request over 4 MiB, which clients read as a ValidationError (too-long), not as a retryable refusal", async () => {
    const big = pb.GetResourcePluginRequest.encode({ ref: "x".repeat(5 * 1024 * 1024) }).finish();
    // A client with no send bound of its own: the server's receive bound refuses it.
    const raw = new grpc.Client(address(), grpc.credentials.createInsecure(), { "grpc.max_send_message_length": -1 });
    const err = await new Promise<grpc.ServiceError>((resolve, reject) => raw.makeUnaryRequest(
      "/ephemera.v1.ResourcePluginService/Get", (b: Uint8Array) => Buffer.from(b), (b: Buffer) => b, big, { deadline: Date.now() + 5000 },
      (e) => (e ? resolve(e) : reject(new Error("a 5 MiB request was accepted"))),
    ));
    raw.close();
    expect(err.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const fromServer = fromServiceError(err);
    expect(fromServer).toBeInstanceOf(ValidationError);
    expect((fromServer as ValidationError).violations).toEqual([expect.objectContaining({
      rule: "too-long", description: expect.stringMatching(/^the request is \d+ bytes, over the 4194304-byte \(4 MiB\) limit/),
    })]);
    // ephemera's own clients stop before sending (clientOptions), with the same error.
    const client = new pb.ResourcePluginServiceClient(address(), grpc.credentials.createInsecure(), clientOptions);
    const own = await call(client.get.bind(client), { ref: "x".repeat(5 * 1024 * 1024) }, 5000).catch((e: unknown) => e);
    client.close();
    expect(own).toBeInstanceOf(ValidationError);
    expect((own as ValidationError).violations[0]).toMatchObject({ rule: "too-long" });
  });

  it("answers health checks with the status the service sets", async () => {
    const Health = load(healthProto)["grpc"]["health"]["v1"]["Health"];
    const client = new Health(address(), grpc.credentials.createInsecure());
    const check = () => new Promise<{ status: string }>((resolve, reject) =>
      client.Check({ service: "" }, { deadline: Date.now() + 2000 }, (err: Error | null, res: { status: string }) => (err ? reject(err) : resolve(res))));
    expect(await check()).toEqual({ status: "SERVING" });
    server.health.setStatus("", "NOT_SERVING");
    expect(await check()).toEqual({ status: "NOT_SERVING" });
    server.health.setStatus("", "SERVING");
    client.close();
  });

  /** What the reflection answers these tests read hold (proto-loader's snake_case fields). */
  interface ReflectionAnswer {
    list_services_response: { service: Array<{ name: string }> };
    file_descriptor_response: { file_descriptor_proto: Buffer[] };
    error_response: { error_code: number };
  }

  /** One request on a reflection stream of `version` (v1 or v1alpha), and its answer. */
  async function reflect(version: "v1" | "v1alpha", request: object): Promise<ReflectionAnswer> {
    const Reflection = load(reflectionProto.replace("/v1/", `/${version}/`))["grpc"]["reflection"][version]["ServerReflection"];
    const client = new Reflection(address(), grpc.credentials.createInsecure());
    const stream = client.ServerReflectionInfo({ deadline: Date.now() + 20_000 });
    const answer = new Promise<ReflectionAnswer>((resolve, reject) => {
      stream.on("data", resolve);
      stream.on("error", reject);
    });
    stream.write(request);
    try {
      return await answer;
    } finally {
      stream.end();
      client.close();
    }
  }

  it("lists ephemera's services through reflection, v1 and v1alpha, and describes them", async () => {
    for (const version of ["v1", "v1alpha"] as const) {
      const names = (await reflect(version, { list_services: "" })).list_services_response.service.map((s) => s.name);
      expect(names).toEqual(expect.arrayContaining(["ephemera.v1.ResourcePluginService", "ephemera.v1.SandboxService", "ephemera.v1.IOContext"]));
    }
    const described = await reflect("v1", { file_containing_symbol: "ephemera.v1.SandboxService" });
    const files = described.file_descriptor_response.file_descriptor_proto;
    expect(files.length).toBeGreaterThan(0);
    expect(Buffer.concat(files).toString("latin1")).toContain("SandboxService");
    const unknown = await reflect("v1alpha", { file_containing_symbol: "ephemera.v1.NoSuchService" });
    expect(unknown.error_response.error_code).toBe(grpc.status.NOT_FOUND);
  });

  it("maps named errors to statuses and back, violations included", async () => {
    const client = new pb.ResourcePluginServiceClient(address(), grpc.credentials.createInsecure());
    const get = () => call(client.get.bind(client), { ref: "x" }, 2000);
    failWith = new ValidationError([
      { field: "spec.create[0].name", description: "is required", rule: "required" },
      { field: "name", description: "bad name", rule: "name-format" },
    ]);
    const invalid = await get().catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(ValidationError);
    expect((invalid as ValidationError).violations).toEqual((failWith as ValidationError).violations);
    failWith = new NotFoundError("plugin x not found");
    await expect(get()).rejects.toEqual(new NotFoundError("plugin x not found"));
    failWith = new ConflictError("in use by sb");
    await expect(get()).rejects.toBeInstanceOf(ConflictError);
    failWith = new UnauthenticatedError("token expired");
    await expect(get()).rejects.toEqual(new UnauthenticatedError("token expired"));
    failWith = new PermissionDeniedError("not yours");
    await expect(get()).rejects.toEqual(new PermissionDeniedError("not yours"));
    client.close();
  });
});

describe("load shedding", () => {
  it("answers RESOURCE_EXHAUSTED past its bound on requests in flight, and serves again once they end", async () => {
    let entered = 0;
    let release!: () => void;
    const barrier = new Promise<void>((r) => (release = r));
    const plugins: Partial<pb.ResourcePluginServiceServer> = {
      get: unary(async (req: pb.GetResourcePluginRequest) => {
        entered++;
        if (req.ref === "slow") await barrier;
        return pb.ResourcePluginVersion.fromPartial({ name: req.ref });
      }),
    };
    const server = await startGrpcServer("127.0.0.1:0", [
      { definition: pb.ResourcePluginServiceService, implementation: plugins as grpc.UntypedServiceImplementation },
    ], createLogger("test", "silent"), { maxInFlight: 1 });
    const client = new pb.ResourcePluginServiceClient(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    try {
      const slow = call(client.get.bind(client), { ref: "slow" }, 5000);
      await waitFor(() => entered === 1, { what: "the first request to be in its handler" });
      const shed = await call(client.get.bind(client), { ref: "fast" }, 5000).then(() => undefined, (e: unknown) => e);
      // RESOURCE_EXHAUSTED comes back as a retryable UnavailableError saying the server is busy.
      expect(shed).toBeInstanceOf(UnavailableError);
      expect(((shed as Error).cause as { code?: number }).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect((shed as Error).message).toContain("the server is busy");
      expect(entered).toBe(1);
      release();
      expect((await slow).name).toBe("slow");
      expect((await call(client.get.bind(client), { ref: "fast" }, 5000)).name).toBe("fast");
    } finally {
      release();
      client.close();
      await server.shutdown();
    }
  });
});

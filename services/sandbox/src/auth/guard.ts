// The public API behind its bearer tokens: every method's handler runs only once the caller
// is authenticated (UNAUTHENTICATED otherwise) and its role allows this request
// (PERMISSION_DENIED otherwise). Health and reflection are not API methods: they stay open.
import { PermissionDeniedError, toServiceError, type grpc, type Logger, type ServiceBinding } from "@ephemera/kit";
import type { ApiAccess } from "./access.js";
import { API_POLICY, methodKey, needed, type MethodRule } from "./policy.js";
import { roleAllows, type Principal } from "./roles.js";

type Call = { metadata: grpc.Metadata; request: unknown; cancelled?: boolean };
type UnaryHandler = (call: Call, callback: grpc.sendUnaryData<unknown>) => void;
type StreamHandler = (call: Call & { emit(event: "error", err: unknown): boolean }) => void;

const principals = new WeakMap<object, Principal>();

/** The caller of an admitted call (undefined when the API is open). */
export const principalOf = (call: object): Principal | undefined => principals.get(call);

/**
 * Wraps every method of the bindings. A method without a rule in `policy`, or one that
 * streams its requests (the rule may depend on the request), stops the API from starting.
 */
export function guard(bindings: ServiceBinding[], access: ApiAccess, logger: Logger, policy = API_POLICY): ServiceBinding[] {
  return bindings.map(({ definition, implementation }) => {
    const guarded: grpc.UntypedServiceImplementation = {};
    for (const [name, method] of Object.entries(definition)) {
      const key = methodKey(method.path);
      const rule = policy[key];
      if (!rule) throw new Error(`the API has no access rule for ${key}: add one to API_POLICY (services/sandbox/src/auth/policy.ts)`);
      if (method.requestStream) throw new Error(`${key} streams its requests: the API guard checks a whole request before its handler`);
      const handler = implementation[name];
      if (!handler) continue;
      const admit = admission(key, rule, access, logger);
      const threw = (err: unknown) => logger.error({ err, method: key }, "API handler threw");
      guarded[name] = (method.responseStream
        ? ((call: Parameters<StreamHandler>[0]) => {
          admit(call).then(
            () => { if (!call.cancelled) (handler as StreamHandler)(call); },
            (err: unknown) => call.emit("error", toServiceError(err)),
          ).catch(threw);
        })
        : ((call: Call, callback: grpc.sendUnaryData<unknown>) => {
          admit(call).then(() => (handler as UnaryHandler)(call, callback), (err: unknown) => callback(toServiceError(err))).catch(threw);
        })) as grpc.UntypedHandleCall;
    }
    return { definition, implementation: guarded };
  });
}

/** Authenticates the call and checks its role; the error says what is wrong, never the token. */
function admission(key: string, rule: MethodRule, access: ApiAccess, logger: Logger): (call: Call) => Promise<void> {
  return async (call) => {
    let who: Principal | undefined;
    try {
      who = await access.authenticate(call.metadata);
      const need = needed(rule, call.request);
      if (!roleAllows(who.role, need.role)) {
        throw new PermissionDeniedError(`role ${who.role} may not call ${key}${need.what ? ` ${need.what}` : ""} (it needs ${need.role})`);
      }
    } catch (err) {
      logger.info({ method: key, caller: who?.name, reason: (err as Error).message }, "API call refused");
      throw err;
    }
    principals.set(call, who);
  };
}

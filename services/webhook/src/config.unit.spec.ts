// The webhook's settings from the environment: the defaults, and each setting that does not
// add up refused with its variable named.
import { DEFAULT_ROUTER_IMAGE, webhookConfig } from "./config.js";
import { webhookConfiguration } from "./register/configuration.js";

const refusal = (env: Record<string, string>) => { try { webhookConfig(env); return ""; } catch (err) { return (err as Error).message; } };

describe("webhookConfig", () => {
  it("given nothing, then loopback 7781, a certificate to make for it, the router of this release, no registration", () => {
    expect(webhookConfig({})).toEqual({
      listen: "127.0.0.1:7781", hosts: ["localhost", "127.0.0.1"],
      inject: { image: "ephemera/router:0.1.0", routes: "routeserver.ephemera-system.svc:7777" },
    });
    const { version } = require("../package.json") as { version: string }; // eslint-disable-line @typescript-eslint/no-require-imports
    expect(DEFAULT_ROUTER_IMAGE).toBe(`ephemera/router:${version}`);
  });

  it("given registration in a cluster, then the Service to name, the names on the certificate and the namespace to leave out", () => {
    const config = webhookConfig({
      EPHEMERA_WEBHOOK_LISTEN: "0.0.0.0:8443", EPHEMERA_WEBHOOK_REGISTER: "true", EPHEMERA_WEBHOOK_SERVICE: "ephemera/webhook",
      EPHEMERA_WEBHOOK_HOSTS: "webhook.ephemera.svc, webhook.ephemera.svc.cluster.local", EPHEMERA_WEBHOOK_NAMESPACE: "ephemera",
      EPHEMERA_ROUTER_TOKEN_SECRET: "routes-token/token",
    });
    expect(config).toMatchObject({
      hosts: ["webhook.ephemera.svc", "webhook.ephemera.svc.cluster.local"],
      register: { target: { service: { namespace: "ephemera", name: "webhook", port: 443 } }, excludeNamespaces: ["ephemera"] },
      inject: { tokenSecret: { name: "routes-token", key: "token" } },
    });
  });

  it("given settings that do not add up, then refused naming the variable", () => {
    expect(refusal({ EPHEMERA_WEBHOOK_TLS_CERT: "/x.crt" })).toBe("EPHEMERA_WEBHOOK_TLS_CERT and EPHEMERA_WEBHOOK_TLS_KEY go together; one of them is empty");
    expect(refusal({ EPHEMERA_WEBHOOK_CA: "/ca.crt" })).toMatch(/^EPHEMERA_WEBHOOK_CA names the CA of a given certificate/);
    expect(refusal({ EPHEMERA_WEBHOOK_URL: "http://127.0.0.1:7781/mutate-pods" })).toMatch(/^EPHEMERA_WEBHOOK_URL must be an https:\/\/ URL without user, query or fragment/);
    expect(refusal({ EPHEMERA_WEBHOOK_URL: "https://a/m", EPHEMERA_WEBHOOK_SERVICE: "ns/webhook" })).toMatch(/^EPHEMERA_WEBHOOK_URL and EPHEMERA_WEBHOOK_SERVICE both say/);
    expect(refusal({ EPHEMERA_WEBHOOK_SERVICE: "webhook" })).toMatch(/^EPHEMERA_WEBHOOK_SERVICE must be namespace\/name\[:port\]/);
    expect(refusal({ EPHEMERA_WEBHOOK_REGISTER: "maybe" })).toBe('EPHEMERA_WEBHOOK_REGISTER must be true or false, got "maybe"');
  });
});

describe("the MutatingWebhookConfiguration", () => {
  it("given a Service target and a CA, then the service reference with the mutate path and the CA base64-encoded", () => {
    const [hook] = webhookConfiguration({ target: { service: { namespace: "ephemera-system", name: "webhook", port: 443 } }, caBundle: "PEM", excludeNamespaces: ["ephemera-system"] }).webhooks!;
    expect(hook!.clientConfig).toEqual({ service: { namespace: "ephemera-system", name: "webhook", port: 443, path: "/mutate-pods" }, caBundle: "UEVN" });
    expect(hook!.namespaceSelector!.matchExpressions![1]!.values).toEqual(["kube-system", "ephemera-system"]);
  });
});

// Whether a webhook answers `GET /healthz` on its address: for a supervisor (pnpm start)
// that does not hold its CA. Liveness only: the certificate is not checked here, the API server checks it.
import { request } from "node:https";
import { HEALTH_PATH } from "./paths.js";

export function checkWebhookHealth(url: string, timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(new URL(HEALTH_PATH, url), { method: "GET", rejectUnauthorized: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => resolve(false));
    req.end();
  });
}

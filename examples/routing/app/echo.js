// The routing example's app, one program for both services (ROLE): `backend` answers JSON
// with its VERSION; `frontend` calls BACKEND_URL and answers JSON holding backend's answer.
// frontend passes on the routing-key headers it received (context propagation, as a traced
// app does), so the router at backend can send the call to a sandbox's fork.
"use strict";
const http = require("node:http");

const ROLE = process.env.ROLE || "backend";
const PORT = Number(process.env.PORT || 8080);
const VERSION = process.env.VERSION || "baseline";
const BACKEND_URL = process.env.BACKEND_URL || "http://backend:8080/";
// The headers that carry a routing key (any one is enough); everything else stays here.
const PROPAGATED = ["baggage", "tracestate", "ot-baggage-sd-routing-key", "uberctx-sd-routing-key"];

function json(res, code, body) {
  res.writeHead(code, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body) + "\n");
}

function callBackend(req) {
  const headers = {};
  for (const h of PROPAGATED) if (req.headers[h] !== undefined) headers[h] = req.headers[h];
  return new Promise((resolve, reject) => {
    const call = http.get(BACKEND_URL, { headers, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (body += d));
      res.on("end", () => {
        try { resolve(JSON.parse(body)); } catch { reject(new Error(`backend answered ${res.statusCode}: ${body.slice(0, 200)}`)); }
      });
    });
    call.on("timeout", () => call.destroy(new Error("backend did not answer within 5 s")));
    call.on("error", reject);
  });
}

const server = http.createServer((req, res) => {
  if (req.url === "/healthz") return json(res, 200, { ok: true });
  if (ROLE === "backend") return json(res, 200, { service: "backend", version: VERSION });
  callBackend(req).then(
    (backend) => json(res, 200, { service: "frontend", version: VERSION, backend }),
    (err) => json(res, 502, { service: "frontend", error: err.message }),
  );
});
server.listen(PORT, () => console.log(`${ROLE} (${VERSION}) listening on ${PORT}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));

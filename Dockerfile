# syntax=docker/dockerfile:1.7
# ephemera's images, one per role, from one build:
#   docker build --target sandbox   -t ephemera/sandbox:0.1.0 .     (also scheduler, runner, iocontext)
#   docker build --target agent     -t ephemera/agent:0.1.0 .       (ephemera-init and ephemera-sidecar in runner pods)
# Each holds its package's built output and production dependencies only (pnpm deploy
# --prod), runs as user 10001, and needs no writable root filesystem (TMPDIR=/tmp, a volume).
ARG NODE_IMAGE=node:20.19.5-bookworm-slim

FROM ${NODE_IMAGE} AS build
# gcc: the runner's ephemera-launch (process driver); pnpm: the workspace's own version.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/* \
 && npm install -g pnpm@10.34.9
WORKDIR /src
COPY . .
# prepare: generates the protobuf code and builds every package (tsc, launcher, bundles).
RUN pnpm install --frozen-lockfile
RUN for s in sandbox scheduler runner iocontext; do \
      pnpm --filter "@ephemera/$s" deploy --prod --legacy "/out/$s"; \
    done
# The agent is one bundle; its V8 code cache is made by the Node of the image that runs it.
RUN mkdir -p /out/agent \
 && cp services/io-agent/dist/agent.cjs services/io-agent/dist/agent-bundle.cjs /out/agent/

FROM ${NODE_IMAGE} AS service
ENV NODE_ENV=production TMPDIR=/tmp
USER 10001:10001
WORKDIR /app
ENTRYPOINT ["node", "dist/main.js"]

# APP_OWNER: who owns /app: root (nobody may change the code), or 10001 for Tilt's live updates.
FROM service AS sandbox
ARG APP_OWNER=0
COPY --from=build --chown=${APP_OWNER}:${APP_OWNER} /out/sandbox /app
EXPOSE 7400 7777 7778 9090

FROM service AS scheduler
ARG APP_OWNER=0
COPY --from=build --chown=${APP_OWNER}:${APP_OWNER} /out/scheduler /app
EXPOSE 7402 9090

FROM service AS runner
ARG APP_OWNER=0
COPY --from=build --chown=${APP_OWNER}:${APP_OWNER} /out/runner /app
EXPOSE 7403 9090

FROM service AS iocontext
ARG APP_OWNER=0
COPY --from=build --chown=${APP_OWNER}:${APP_OWNER} /out/iocontext /app
EXPOSE 7401 9090

FROM ${NODE_IMAGE} AS agent
COPY --from=build --chown=0:0 /out/agent /agent
# Written once here, read by every init and sidecar (docs/agent.md, Start-up).
RUN EPHEMERA_AGENT_WRITE_CODE_CACHE=1 EPHEMERA_RUN_ID=x EPHEMERA_TOKEN=x EPHEMERA_IOCONTEXT=x:1 \
    node /agent/agent.cjs init --check
USER 10001:10001
ENTRYPOINT ["node", "/agent/agent.cjs"]

# ephemera's images, one per role, from the files `pnpm images` (scripts/images.sh) stages on
# the host in .ephemera/images/<role>: nothing here needs the network but the router stage's
# iptables, installed from Debian's mirrors (once: Docker keeps the layer).
#   bash scripts/images.sh      builds all nine: ephemera/{agent,sandbox,scheduler,runner,iocontext,webhook,tunnel,console,router}:<version>
#   docker build --target runner --build-arg NODE_IMAGE=... -t ephemera/runner:0.1.0 .   (after --stage)
# Each service image holds its package's built output and production dependencies only
# (pnpm deploy --prod, without type declarations or source maps), runs as user 10001, and
# needs no writable root filesystem (TMPDIR=/tmp, a volume). The agent stage comes first:
# Docker's legacy builder builds every stage before the target one, so the router, which
# fetches a package, comes last.
ARG NODE_IMAGE=ephemera/node:20.20.2

# ephemera-init and ephemera-sidecar in runner pods: one bundle, its V8 code cache made by
# the Node of this image, written once here and read by every init and sidecar (docs/agent.md).
FROM ${NODE_IMAGE} AS agent
COPY --chown=0:0 .ephemera/images/agent /agent
RUN EPHEMERA_AGENT_WRITE_CODE_CACHE=1 EPHEMERA_RUN_ID=x EPHEMERA_TOKEN=x EPHEMERA_IOCONTEXT=x:1 \
    node /agent/agent.cjs init --check
USER 10001:10001
ENTRYPOINT ["node", "/agent/agent.cjs"]

FROM ${NODE_IMAGE} AS service
ENV NODE_ENV=production TMPDIR=/tmp
USER 10001:10001
WORKDIR /app
ENTRYPOINT ["node", "dist/main.js"]

# APP_OWNER: who owns /app: root (nobody may change the code), or 10001 for Tilt's live updates.
FROM service AS sandbox
ARG APP_OWNER=0
COPY --chown=${APP_OWNER}:${APP_OWNER} .ephemera/images/sandbox /app
EXPOSE 7400 7777 7778 9090

FROM service AS scheduler
ARG APP_OWNER=0
COPY --chown=${APP_OWNER}:${APP_OWNER} .ephemera/images/scheduler /app
EXPOSE 7402 9090

FROM service AS runner
ARG APP_OWNER=0
COPY --chown=${APP_OWNER}:${APP_OWNER} .ephemera/images/runner /app
EXPOSE 7403 9090

FROM service AS iocontext
ARG APP_OWNER=0
COPY --chown=${APP_OWNER}:${APP_OWNER} .ephemera/images/iocontext /app
EXPOSE 7401 9090

# The admission webhook that injects the routing sidecar; also `node dist/patch.js`, the same
# injection for manifests (docker run --rm -i --entrypoint node ephemera/webhook:0.1.0 dist/patch.js - < app.yaml).
FROM service AS webhook
ARG APP_OWNER=0
COPY --chown=${APP_OWNER}:${APP_OWNER} .ephemera/images/webhook /app
EXPOSE 8443 9090

# The tunnel service: workstations' sessions for local workloads (docs/tunnel.md).
FROM service AS tunnel
ARG APP_OWNER=0
COPY --chown=${APP_OWNER}:${APP_OWNER} .ephemera/images/tunnel /app
EXPOSE 7785 9090

# The web console (docs/console.md): its server and the built page (dist/web, with its .gz and .br).
FROM service AS console
ARG APP_OWNER=0
COPY --chown=${APP_OWNER}:${APP_OWNER} .ephemera/images/console /app
EXPOSE 7790 9090

# ephemera-router, the routing sidecar injected into baseline pods (`node /router/router.cjs`,
# user 10001, no capabilities), and its init container `ephemera-router-init` (run as root
# with NET_ADMIN: it installs the pod's iptables REDIRECT rules). docs/routing.md.
FROM ${NODE_IMAGE} AS router
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends iptables >/dev/null \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/log/alternatives.log \
    && ln -s /router/ephemera-router-init /usr/local/bin/ephemera-router-init
COPY --chown=0:0 .ephemera/images/router /router
ENV NODE_ENV=production
USER 10001:10001
EXPOSE 15020
CMD ["node", "/router/router.cjs"]

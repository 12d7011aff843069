# syntax=docker/dockerfile:1
# The Switchyard engine image. Build: docker build -t switchyard .
# Run: docker run -v "$PWD/deploy/switchyard.yaml:/etc/switchyard/config.yaml:ro" \
#        -e REDIS_URL=redis://… -e CLUSTER_SECRET=… -p 3111:3111 -p 49134:49134 switchyard
# (docker-compose.yml at the root runs Redis, three engine replicas, nginx and example workers.)

# ── builder: install everything, compile TypeScript, then drop the dev dependencies ─────────────────
FROM node:20-bookworm-slim AS builder
WORKDIR /app
# Only what `npm ci` and its `prepare` script (tsc -p tsconfig.build.json) read; .dockerignore keeps
# node_modules, dist, tests and benchmarks out of the context.
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN --mount=type=cache,target=/root/.npm \
    npm ci --no-audit --no-fund \
 && npm prune --omit=dev --no-audit --no-fund

# ── runtime: node, tini, the compiled engine and its production dependencies ────────────────────────
FROM node:20-bookworm-slim AS runtime
# tini as PID 1: forwards SIGTERM to the engine's primary (which drains its children and exits 0) and
# reaps zombies. `-s` (subreaper) keeps it correct and quiet when another init already is PID 1
# (docker-compose.yml sets `init: true`, Kubernetes may share the process namespace).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production
WORKDIR /app
# Owned by root and read-only for the `node` user that runs the engine.
COPY --from=builder /app/package.json ./package.json
COPY --from=builder /app/node_modules ./node_modules
COPY --from=builder /app/dist ./dist
COPY bin ./bin
# The config is mounted here (docker-compose.yml: ./deploy/switchyard.yaml; Kubernetes: a ConfigMap).
RUN mkdir -p /etc/switchyard
USER node
# HTTP routes, the worker WebSocket, the admin listener (/healthz, /readyz).
EXPOSE 3111 49134 9464
# Runs inside the container's network namespace, so 127.0.0.1 reaches the admin listener whether it
# binds 127.0.0.1 (the default) or 0.0.0.0 (deploy/switchyard.yaml). /readyz is 503 while starting and
# draining. The image has no curl or wget: node's fetch does it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9464/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "-s", "--"]
CMD ["node", "bin/switchyard.js", "--config", "/etc/switchyard/config.yaml"]

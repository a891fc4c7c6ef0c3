# agentd in a container. Build: docker build -t agentd .
# Run (your code as the workspace of principal `you`, sessions and the database in a volume):
#   docker run -d -p 8765:8765 --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     -v agentd-home:/var/lib/agentd -v "$PWD:/workspaces/you" agentd
#   docker exec <container> agentd token create --principal you
# Node: a maintained LTS from the official image (Debian's nodejs is older and past its end of life).
FROM node:22-bookworm-slim AS node

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md alembic.ini ./
COPY agentd ./agentd
COPY migrations ./migrations
# A wheel, not an editable install: the image holds the installed package only.
RUN pip wheel --no-cache-dir --no-deps -w /wheels .

FROM python:3.11-slim
# git: the WIP checkpoint of a turn stopped by a budget gate; ripgrep: the grep tool;
# node/npm/npx (copied from the node stage): MCP servers run with npx; tini: PID 1 that forwards SIGTERM (graceful drain) and reaps;
# bubblewrap: bash's sandbox. It needs user namespaces, which Docker's default seccomp profile
# forbids: run with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`, or
# set AGENTD_SANDBOX=none to rely on the container alone (with AGENTD_AUTH=token off loopback,
# agentd refuses to start unsandboxed unless told so).
RUN apt-get update \
    && apt-get install -y --no-install-recommends git ripgrep tini bubblewrap ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    # Bind-mounted workspaces belong to the host's user: let git work in them anyway.
    && git config --system --add safe.directory '*'
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
    && node --version
COPY deploy/docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
# The locked dependencies (hashes checked), then the wheel alone: the image holds what CI tested.
COPY requirements.lock /tmp/requirements.lock
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --require-hashes -r /tmp/requirements.lock \
    && pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels /tmp/requirements.lock \
    && useradd --create-home --uid 1000 agentd \
    && mkdir -p /var/lib/agentd /workspaces && chown agentd:agentd /var/lib/agentd /workspaces
# No USER: the entrypoint starts as root only to make the mounted workspace writable (a
# folder Docker created for the mount is root-owned), then runs agentd as the mount's owner
# (your uid, so files stay yours) or as `agentd` (uid 1000); never as root.
WORKDIR /workspaces
# Reachable from outside the container, so every request needs a token (R-X1):
# docker exec <container> agentd token create --principal you
ENV AGENTD_HOST=0.0.0.0 AGENTD_PORT=8765 AGENTD_AUTH=token \
    AGENTD_HOME=/var/lib/agentd AGENTD_WORKSPACE_ROOT=/workspaces
# Sessions, transcripts and the SQLite database (unless AGENTD_DATABASE_URL points elsewhere).
VOLUME ["/var/lib/agentd"]
EXPOSE 8765
# Shell form: the port is read when the check runs, so AGENTD_PORT=9000 is followed.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD python -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:${AGENTD_PORT:-8765}/healthz', timeout=2).status != 200)"
ENTRYPOINT ["tini", "--", "/usr/local/bin/docker-entrypoint.sh"]
CMD ["agentd", "serve"]

FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY protocol ./protocol
COPY server ./server
COPY migrations ./migrations
RUN pip install --no-cache-dir -e . && useradd --create-home agentd && mkdir /workspaces && chown agentd /workspaces
USER agentd
# Reachable from outside the container, so every request needs a token (R-X1):
# docker exec <container> agentd token create --principal you
ENV AGENTD_HOST=0.0.0.0 AGENTD_PORT=8765 AGENTD_AUTH=token
EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8765/healthz').status==200 else 1)"
CMD ["agentd", "serve"]

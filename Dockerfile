FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY protocol ./protocol
COPY server ./server
COPY migrations ./migrations
RUN pip install --no-cache-dir -e . && useradd --create-home agentd && mkdir /workspaces && chown agentd /workspaces
USER agentd
ENV AGENTD_HOST=0.0.0.0 AGENTD_PORT=8765
EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8765/healthz').status==200 else 1)"
CMD ["agentd", "serve"]

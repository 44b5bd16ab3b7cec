# The admission webhook server: gunicorn with TLS, configured from the environment (README.md,
# Configuration). The certificate and key are mounted; the image holds none.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    BIND=0.0.0.0:8443

WORKDIR /app

# constraints.txt pins the test tools too; only what requirements.txt names is installed.
COPY requirements.txt constraints.txt ./
RUN pip install --no-cache-dir -r requirements.txt -c constraints.txt

COPY webhook/ webhook/
COPY policies/ policies/
# The root filesystem is read-only at run time: compile now rather than on every start.
RUN python -m compileall -q webhook

# The same fixed ids as the manifests' runAsUser and runAsGroup; numeric in USER, so the
# kubelet can check runAsNonRoot without reading /etc/passwd.
RUN groupadd --system --gid 65532 webhook
RUN useradd --system --uid 65532 --gid webhook --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin webhook
USER 65532:65532

EXPOSE 8443
ENTRYPOINT ["gunicorn", "-c", "python:webhook.server.gunicorn_conf"]

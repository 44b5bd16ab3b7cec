"""gunicorn configuration, as a Python module: `gunicorn -c python:webhook.server.gunicorn_conf`.

Everything comes from the same Settings the application reads. The master checks the policies
and the certificate files before it forks, so a bad policy stops startup with a message that
names the file, the line and the field, instead of a worker that fails to boot.
"""

from __future__ import annotations

import sys
from typing import Any

from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError
from webhook.server.settings import Settings, SettingsError

try:
    _settings = Settings.from_environ()
except SettingsError as _error:
    sys.exit(f"webhook: {_error}")

wsgi_app = "webhook.server.app:create_app()"
bind = [_settings.bind]
certfile = str(_settings.cert_file)
keyfile = str(_settings.key_file)
worker_class = "gthread"
workers = _settings.workers
threads = _settings.threads
# The kube-apiserver keeps idle connections for 90 s; a shorter keep-alive here would make it
# pay a TLS handshake again and race us on closing connections.
keepalive = 120
timeout = 30
graceful_timeout = 20
loglevel = _settings.log_level
accesslog = None
errorlog = "-"
# No runtime control socket: nothing here needs one, and the deployed root filesystem is read-only.
control_socket_disable = True


def on_starting(server: Any) -> None:
    for path, what in ((_settings.cert_file, "certificate"), (_settings.key_file, "private key")):
        if not path.is_file():
            sys.exit(
                f"webhook: the TLS {what} {path} does not exist: run `make certs`, or set "
                "TLS_CERT_FILE and TLS_KEY_FILE"
            )
    try:
        policy_set = PolicySet.load(_settings.policy_dir)
    except PolicyLoadError as error:
        problems = "\n".join(f"  {problem}" for problem in error.problems)
        sys.exit(f"webhook: the policies in {_settings.policy_dir} do not load:\n{problems}")
    names = ", ".join(policy.name for policy in policy_set.policies)
    server.log.info("policies loaded from %s: %s", _settings.policy_dir, names)

"""The Flask application: the admission service's routes (routes.py), and what gunicorn serves
(`create_served_app`): the application behind the serving edge's one door (edge/served_app.py).
"""

from __future__ import annotations

from flask import Blueprint, Flask
from werkzeug.exceptions import HTTPException

from webhook.policy.namespace_labels import NamespaceLabelSource
from webhook.policy.policy_set import PolicySet
from webhook.server.edge.served_app import ServedApp
from webhook.server.routes import AdmissionService
from webhook.server.settings import Settings


def create_app(
    settings: Settings | None = None,
    policies: PolicySet | None = None,
    namespace_labels: NamespaceLabelSource | None = None,
) -> Flask:
    """The application (see `AdmissionService.start` for what starting it does)."""
    return _application(
        AdmissionService.start(settings or Settings.from_environ(), policies, namespace_labels)
    )


def create_served_app() -> ServedApp:
    """What gunicorn serves: the application, and the service's callback for the requests the
    serving edge refused before the application saw them."""
    service = AdmissionService.start(Settings.from_environ())
    return ServedApp(_application(service), service.refused_at_front)


def admission_routes(service: AdmissionService) -> Blueprint:
    routes = Blueprint("admission", __name__)
    routes.add_url_rule("/mutate", view_func=service.mutate, methods=["POST"])
    routes.add_url_rule("/validate", view_func=service.validate, methods=["POST"])
    routes.add_url_rule("/healthz", view_func=service.healthz, methods=["GET"])
    routes.add_url_rule("/readyz", view_func=service.readyz, methods=["GET"])
    routes.add_url_rule("/metrics", view_func=service.metrics, methods=["GET"])
    return routes


def _application(service: AdmissionService) -> Flask:
    app = Flask("webhook")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.register_blueprint(admission_routes(service))
    app.register_error_handler(HTTPException, service.http_error)
    return app

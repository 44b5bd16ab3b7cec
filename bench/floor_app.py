"""The floor: gunicorn, TLS and Flask answering every review "allowed" without judging it.

What the webhook does beyond this costs admissions/s; served with the webhook's own gunicorn
configuration, so that only the application differs:
`gunicorn -c python:webhook.server.gunicorn_conf bench.floor_app:app`.
"""

from __future__ import annotations

import json

from flask import Flask, Response, jsonify, request

app = Flask("floor")


def _allowed() -> Response:
    uid = json.loads(request.get_data())["request"]["uid"]
    return jsonify(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True},
        }
    )


app.post("/mutate")(_allowed)
app.post("/validate")(_allowed)


@app.get("/healthz")
def healthz() -> Response:
    return jsonify(status="ok")

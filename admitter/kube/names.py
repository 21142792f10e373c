"""Names that the webhook server, `admitter certs` and the `deploy/` manifests must agree on."""

from __future__ import annotations

NAMESPACE = "admitter-system"
SERVICE_ACCOUNT = "admitter"
CONTROLLER_USERNAME = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
"""The identity the controller runs as; it alone may unsuspend a Job it admitted."""
SERVICE = "admitter-webhook"
SECRET = "admitter-webhook-tls"
WEBHOOK_CONFIGURATION = "admitter-webhook"
"""Name of both the Mutating- and the ValidatingWebhookConfiguration."""

CA_FILE = "ca.crt"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
"""File names inside the certificate directory: the keys of a `kubernetes.io/tls` Secret."""

MUTATE_JOBS_PATH = "/mutate-jobs"
VALIDATE_JOBS_PATH = "/validate-jobs"
VALIDATE_RESOURCES_PATH = "/validate-admitter"
MUTATE_PODS_PATH = "/mutate-pods"
VALIDATE_PODS_PATH = "/validate-pods"
GATE_PODS_PATH = "/mutate-pod-placement"
HEALTH_PATH = "/healthz"

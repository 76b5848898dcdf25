"""The webhooks' serving certificate in the Helm chart, where OLM would have issued it: by the operator itself
(``--manage-certs``, the default) or by cert-manager (an Issuer and a Certificate, and its CA injector's annotation).
The operator's own needs a few rules beyond the CSV's; with cert-manager its RBAC is exactly the CSV's."""

from __future__ import annotations

from typing import Any

from . import yamlout
from .chart_objects import END, framed, metadata
from .clusterserviceversion import DEPLOYMENT
from .helmtext import Block, Expr, Lines

# As OLM names the Service in front of a CSV's webhooks, so that docs and messages name the same Service either way.
WEBHOOK_SERVICE = f"{DEPLOYMENT}-service"
WEBHOOK_CONFIGURATION = DEPLOYMENT
CERT_SECRET = f"{DEPLOYMENT}-webhook-cert"  # the serving pair: cert-manager's Certificate, or the operator's own
SERVING_CERTIFICATE = f"{DEPLOYMENT}-serving-cert"  # cert-manager's Certificate, whose CA its injector writes
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"  # where OLM mounts the pair, and where the operator reads it
# The self-signed CA the chart makes for cert-manager: 3 years, renewed a year before its end, as the operator's own.
CA_DURATION = "26280h"
CA_RENEW_BEFORE = "8760h"
WITHOUT_CERT_MANAGER = "{{- if not .Values.certManager.enabled }}"
WITH_CERT_MANAGER = "{{- if .Values.certManager.enabled }}"


def inject_ca() -> Lines:
    """cert-manager's CA injector writes the CA of the serving Certificate into the object's caBundles."""
    return Lines((WITH_CERT_MANAGER, f"cert-manager.io/inject-ca-from: {{{{ .Release.Namespace }}}}/{SERVING_CERTIFICATE}", END))


def certificate_rules(converted: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What ``--manage-certs`` needs beyond the CSV's rules: cluster-wide, to write its CA into the webhooks and the
    conversion; in its namespace, to keep the Secret (created once, then read and renewed by name)."""
    cluster = [
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
         "resourceNames": [WEBHOOK_CONFIGURATION], "verbs": ["get", "patch"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": converted, "verbs": ["patch"]},
    ]
    namespaced = [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [CERT_SECRET], "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]
    return cluster, namespaced


def without_cert_manager(rules: list[dict[str, Any]]) -> Lines:
    return Lines((WITHOUT_CERT_MANAGER, *yamlout.dump(rules).splitlines(), END))


def certificates(common: dict[str, Any]) -> list[dict[Any, Any]]:
    """With cert-manager: the serving Certificate, from the admin's issuer or from a self-signed CA made here."""
    cm = "cert-manager.io/v1"
    ca_secret = f"{DEPLOYMENT}-ca"
    own_issuer = "{{- if not .Values.certManager.issuerRef }}"
    names = [f"{WEBHOOK_SERVICE}.{{{{ .Release.Namespace }}}}.svc", f"{WEBHOOK_SERVICE}.{{{{ .Release.Namespace }}}}.svc.cluster.local"]
    key = {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
    return [
        framed(own_issuer, {"apiVersion": cm, "kind": "Issuer", "metadata": metadata({"metadata": {"name": f"{DEPLOYMENT}-selfsigned"}}, common),
                             "spec": {"selfSigned": {}}}, None),
        {"apiVersion": cm, "kind": "Certificate", "metadata": metadata({"metadata": {"name": ca_secret}}, common),
         # As long-lived as the operator's own CA: cert-manager's injector puts only the serving Secret's CA in the
         # caBundles, so each rotation of this CA is a moment the pods serve a pair the caBundles no longer trust.
         "spec": {"isCA": True, "commonName": ca_secret, "secretName": ca_secret, "privateKey": key,
                  "duration": CA_DURATION, "renewBefore": CA_RENEW_BEFORE,
                  "issuerRef": {"name": f"{DEPLOYMENT}-selfsigned", "kind": "Issuer"}}},
        framed(None, {"apiVersion": cm, "kind": "Issuer", "metadata": metadata({"metadata": {"name": ca_secret}}, common),
                       "spec": {"ca": {"secretName": ca_secret}}}, END),
        {"apiVersion": cm, "kind": "Certificate", "metadata": metadata({"metadata": {"name": SERVING_CERTIFICATE}}, common),
         "spec": {"secretName": CERT_SECRET, "dnsNames": [Expr(name) for name in names], "privateKey": key, "usages": ["server auth"],
                  "issuerRef": Block(f"(.Values.certManager.issuerRef | default (dict \"name\" \"{ca_secret}\" \"kind\" \"Issuer\"))")}},
    ]


def operator_args() -> Lines:
    """The operator's own certificate, unless cert-manager issues it."""
    return Lines((WITHOUT_CERT_MANAGER, "- --manage-certs", f"- --cert-secret={CERT_SECRET}", f"- --webhook-service={WEBHOOK_SERVICE}",
                  f"- --webhook-configuration={WEBHOOK_CONFIGURATION}", END))


def mount() -> Lines:
    """cert-manager's pair, mounted where OLM mounts one."""
    return Lines((WITH_CERT_MANAGER, "- name: serving-cert", f"  mountPath: {CERT_DIR}", "  readOnly: true", END))


def volume() -> Lines:
    return Lines((WITH_CERT_MANAGER, "- name: serving-cert", "  secret:", f"    secretName: {CERT_SECRET}", END))

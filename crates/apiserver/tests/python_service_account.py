"""Acts as a namespaced ServiceAccount through the official Python client, printing one line
per step: what worked, and the HTTP status of what was refused.

Usage: python_service_account.py KUBECONFIG OWN_NAMESPACE OTHER_NAMESPACE
"""
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=sys.argv[1])
own, other = sys.argv[2], sys.argv[3]
core = client.CoreV1Api()


def attempt(label, fn):
    try:
        fn()
        print("%s ok" % label, flush=True)
    except ApiException as e:
        print("%s %d %s" % (label, e.status, e.reason), flush=True)


def create_own():
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="from-python"), data={"k": "v"})
    core.create_namespaced_config_map(own, body)


def list_own():
    names = [c.metadata.name for c in core.list_namespaced_config_map(own).items]
    assert "from-python" in names, names


def watch_other_secrets():
    for _ in watch.Watch().stream(core.list_namespaced_secret, other, timeout_seconds=5):
        break


attempt("create-own-configmap", create_own)
attempt("list-own-configmaps", list_own)
attempt("list-own-secrets", lambda: core.list_namespaced_secret(own))
attempt("list-all-secrets", lambda: core.list_secret_for_all_namespaces())
attempt("list-all-configmaps", lambda: core.list_config_map_for_all_namespaces())
attempt("watch-other-secrets", watch_other_secrets)
attempt("read-other-secret", lambda: core.read_namespaced_secret("bmc-creds", other))

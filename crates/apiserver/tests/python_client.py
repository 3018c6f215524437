"""Lists and watches widgets through the official Python client, printing one line per step.

Usage: python_client.py KUBECONFIG EXPECTED_EVENTS
"""
import sys

from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
want = int(sys.argv[2])
api = client.CustomObjectsApi()
listed = api.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
names = sorted(item["metadata"]["name"] for item in listed["items"])
print("LIST " + ",".join(names), flush=True)
rv = listed["metadata"]["resourceVersion"]
print("WATCHING", flush=True)
seen = 0
w = watch.Watch()
for event in w.stream(
    api.list_namespaced_custom_object,
    "example.com",
    "v1",
    "default",
    "widgets",
    resource_version=rv,
    timeout_seconds=30,
):
    obj = event["object"]
    print("EVENT %s %s %s" % (event["type"], obj["metadata"]["name"], obj["spec"]["size"]), flush=True)
    seen += 1
    if seen >= want:
        w.stop()
print("DONE", flush=True)

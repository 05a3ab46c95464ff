#!/usr/bin/env python3
"""kube-apiserver CPU per request, by kind of request, on the local control plane (prints figures).

Evidence for the Reconciler benchmark: what each request a reconcile sends costs the apiserver, next to the
server-side applies the ceiling loop sends. Sends N requests of each kind with 16 in flight over kept-alive
connections and divides the apiserver's CPU-seconds (from /proc) by N.

Usage: tests/bench/apiserver_costs.py NAMESPACE N   (needs the bench's converged BenchApps app-0..app-N-1 in
NAMESPACE: run tests/bench/reconciler.sh first; the plane stays up until `make cluster-down`)
"""
import concurrent.futures
import http.client
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse

cache = os.environ.get("RULEPLANE_CACHE", os.path.expanduser("~/.cache/ruleplane"))
env = dict(line.strip().split("=", 1) for line in open(f"{cache}/cluster/env") if "=" in line)
server = urllib.parse.urlparse(env["APISERVER_URL"])
token = env["ADMIN_TOKEN"]
namespace, count = sys.argv[1], int(sys.argv[2])
tls = ssl.create_default_context(cafile=f"{cache}/cluster/certs/ca.crt") if os.path.exists(
    f"{cache}/cluster/certs/ca.crt") else ssl._create_unverified_context()
tls.check_hostname = False
apiserver = int(open(f"{cache}/cluster/kube-apiserver.pid").read())
local = threading.local()


def cpu_seconds():
    fields = open(f"/proc/{apiserver}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send(method, path, body, content_type):
    if not hasattr(local, "conn"):
        local.conn = http.client.HTTPSConnection(server.hostname, server.port, context=tls)
    local.conn.request(method, path, json.dumps(body),
                       {"Authorization": f"Bearer {token}", "Content-Type": content_type})
    response = local.conn.getresponse()
    response.read()
    if response.status >= 300:
        raise RuntimeError(f"{method} {path}: {response.status}")


def measure(label, request):
    before, started = cpu_seconds(), time.time()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(request, range(count)))
    print(f"{label:52s} {count} in {time.time() - started:5.1f} s; kube-apiserver CPU "
          f"{1000 * (cpu_seconds() - before) / count:.2f} ms per request")


tag = int(time.time())
measure("status merge patch of a BenchApp (custom resource)", lambda i: send(
    "PATCH", f"/apis/bench.ruleplane.dev/v1/namespaces/{namespace}/benchapps/app-{i}/status",
    {"status": {"observedGeneration": tag % 100000 + i}}, "application/merge-patch+json"))
measure("Event create (events.k8s.io/v1)", lambda i: send(
    "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
    {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": f"app-{i}.{tag:x}"},
     "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()), "action": "Reconcile",
     "reason": "Updated", "note": "updated a ConfigMap", "type": "Normal",
     "regarding": {"apiVersion": "bench.ruleplane.dev/v1", "kind": "BenchApp", "name": f"app-{i}",
                   "namespace": namespace},
     "reportingController": "ruleplane", "reportingInstance": "costs"}, "application/json"))
for verb in ("create", "update"):
    measure(f"ConfigMap server-side apply ({verb})", lambda i: send(
        "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/costs-{i}?fieldManager=costs&force=true",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"costs-{i}"},
         "data": {"v": f"{verb}-{tag}"}}, "application/apply-patch+yaml"))
for verb in ("create", "update"):
    measure(f"Deployment server-side apply ({verb})", lambda i: send(
        "PATCH", f"/apis/apps/v1/namespaces/{namespace}/deployments/costs-{i}?fieldManager=costs&force=true",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"costs-{i}", "labels": {"app": f"costs-{i}"}},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": f"costs-{i}"}},
                  "template": {"metadata": {"labels": {"app": f"costs-{i}"}},
                               "spec": {"containers": [{"name": "web", "image": f"nginx:{verb}",
                                                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}},
        "application/apply-patch+yaml"))

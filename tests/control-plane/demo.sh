#!/usr/bin/env bash
# `make demo`: runs the ruleplane manager on examples/ against the local control plane and shows what it does.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
# RULEPLANE_CLUSTER_DIR: the control plane's directory (cluster.sh --dir), e.g. a throwaway one under /tmp; by
# default the one `make cluster-up` starts.
cluster_dir=${RULEPLANE_CLUSTER_DIR:-$cache/cluster}
"$root/tests/control-plane/cluster.sh" up --dir "$cluster_dir" >/dev/null
# shellcheck disable=SC1091
. "$cluster_dir/env"
export KUBECONFIG="$cluster_dir/kubeconfig"
kubectl() { "$BIN_DIR/kubectl" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
explain() { printf '   %s\n' "$@"; }

say "1. A real local control plane is running"
explain "etcd 3.5 + kube-apiserver + kube-controller-manager $(basename "$BIN_DIR"), built from the Kubernetes Go module, at $APISERVER_URL"
kubectl version 2>/dev/null | sed 's/^/   /'

say "2. Validating and testing the example rules offline (what CI would run)"
explain "examples/other-tools/ uses kinds another tool installs; their CRDs are vendored in examples/crds/ (--crds):"
echo "   \$ ruleplane validate examples/ --crds examples/crds"
"$target/debug/ruleplane" validate "$root/examples" --crds "$root/examples/crds" | sed 's/^/   /'
explain "" "examples/*.test.yaml hold test cases (a parent in, children and status out; nodes and pods in, placements out):"
echo "   \$ ruleplane test examples/ --crds examples/crds"
(cd "$root" && "$target/debug/ruleplane" test examples/ --crds examples/crds) | sed 's/^/   /'
explain "" "Rendered children are checked against their kinds' schemas (built-in kinds: the apiserver's own OpenAPI)," \
  "without a test case: a misspelt CronJob field in a copy of crontab.yaml fails validation at its template line:"
typo=$(mktemp -d -t ruleplane-typo.XXXXXX)
sed 's/^          concurrencyPolicy: \(.*\)$/          concurrencyPolicy: \1\n          sucessfulJobsHistoryLimit: 3/' \
  "$root/examples/crontab.yaml" >"$typo/crontab.yaml"
echo "   \$ ruleplane validate typo/crontab.yaml"
(cd "$typo" && "$target/debug/ruleplane" validate crontab.yaml 2>&1) | sed 's/^/   /' || true
explain "" "Built-in kinds differ by Kubernetes version (1.35-1.37 supported, default the newest): a Job child using" \
  "spec.scheduling (served from 1.37) checked for a 1.36 cluster says so:"
cat >"$typo/jobs.yaml" <<'RULE'
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: training-jobs }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: job
      template: |
        apiVersion: batch/v1
        kind: Job
        metadata: { name: "{{ metadata.name }}" }
        spec:
          scheduling: {}
          template:
            spec:
              restartPolicy: Never
              containers: [ { name: train, image: busybox } ]
RULE
echo "   \$ ruleplane validate jobs.yaml --kubernetes-version 1.36"
(cd "$typo" && "$target/debug/ruleplane" validate jobs.yaml --kubernetes-version 1.36 2>&1) | sed 's/^/   /' || true
explain "" "CEL validation rules (x-kubernetes-validations) of a ResourceDefinition's schema are checked offline too:"
cat >"$typo/autoscaler.yaml" <<'RULE'
apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: autoscaler.scale.example.org }
spec:
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-validations:
                - rule: self.minReplicas <= self.maxReplicas
                  messageExpression: "'minReplicas (' + string(self.minReplicas) + ') exceeds maxReplicas'"
              properties:
                minReplicas: { type: integer }
                maxReplicas: { type: integer }
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: web-autoscaler }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: autoscaler
      template: |
        apiVersion: scale.example.org/v1
        kind: Autoscaler
        metadata: { name: "{{ metadata.name }}" }
        spec: { minReplicas: 5, maxReplicas: 3 }
RULE
echo "   \$ ruleplane validate autoscaler.yaml"
(cd "$typo" && "$target/debug/ruleplane" validate autoscaler.yaml 2>&1) | sed 's/^/   /' || true
rm -rf "$typo"

# The other tool is not installed yet when the manager starts (an earlier demo's CRDs, and their objects, go).
kubectl delete -f "$root/examples/crds/" --ignore-not-found --wait=true >/dev/null 2>&1 || true

log=$(mktemp -t ruleplane-demo.XXXXXX.log)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
metrics_port=$(free_port); health_port=$(free_port)
say "3. Starting the manager: ruleplane run --rules examples/ --crds examples/crds   (log: $log)"
explain "(--crds here only says examples/crds/ holds no rules: the manager asks the apiserver how kinds are served.)"
"$target/debug/ruleplane" run --rules "$root/examples" --crds "$root/examples/crds" --kubeconfig "$KUBECONFIG" \
  --metrics-bind-address "127.0.0.1:$metrics_port" --health-probe-bind-address "127.0.0.1:$health_port" \
  --leader-election-namespace default --identity demo >"$log" 2>&1 &
manager=$!
trap 'kill $manager 2>/dev/null || true; wait $manager 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  curl -fs "http://127.0.0.1:$health_port/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done
head -n 25 "$log" | sed 's/^/   /'
explain "" "As the only replica it took every unit of work through Leases in default (32 Reconciler shards, the" \
  "ResourceDefinitions, the SchedulerPolicies) and started one worker per rule."

say "4. The ResourceDefinition rules became CustomResourceDefinitions"
for _ in $(seq 1 60); do
  kubectl get crd crontabs.stable.example.com >/dev/null 2>&1 && break
  sleep 0.5
done
kubectl wait --for=condition=Established crd -l app.kubernetes.io/managed-by=ruleplane --timeout=60s >/dev/null
kubectl get crd -l app.kubernetes.io/managed-by=ruleplane -L ruleplane.dev/rule | sed 's/^/   /'
explain "" "Each CRD carries the labels app.kubernetes.io/managed-by=ruleplane and ruleplane.dev/rule=<rule>."

say "5. Users create objects of the new kind (user story 1) and kubectl just works"
cat <<'YAML' | tee /dev/stderr 2>&1 | kubectl apply -f - | sed 's/^/   /'
apiVersion: stable.example.com/v1
kind: CronTab
metadata: { name: new-cron-object, namespace: default }
spec: { cronSpec: "* * * * */5", image: my-awesome-cron-image }
YAML
echo "   \$ kubectl get crontabs"
kubectl get crontabs | sed 's/^/   /'
echo "   \$ kubectl get ct new-cron-object -o jsonpath='{.spec.image}'"
printf '   %s\n' "$(kubectl get ct new-cron-object -o jsonpath='{.spec.image}')"

say "6. The Reconciler rule turned the CronTab into a CronJob (user story 2), and projected its status"
for _ in $(seq 1 60); do
  kubectl get cronjob new-cron-object >/dev/null 2>&1 && break
  sleep 0.25
done
echo "   \$ kubectl get cronjobs -L ruleplane.dev/rule"
kubectl get cronjobs -L ruleplane.dev/rule | sed 's/^/   /'
echo "   \$ kubectl wait --for=condition=Ready crontab/new-cron-object"
kubectl wait --for=condition=Ready crontab/new-cron-object --timeout=30s | sed 's/^/   /'
status_path='{.status.cronJob}{range .status.conditions[*]} {.type}={.status}{end}'
echo "   \$ kubectl get crontab new-cron-object -o jsonpath='$status_path'"
printf '   %s\n' "$(kubectl get crontab new-cron-object -o jsonpath="$status_path")"
explain "" "Drift is repaired: deleting the CronJob by hand brings it back."
echo "   \$ kubectl delete cronjob new-cron-object"
kubectl delete cronjob new-cron-object --wait=false | sed 's/^/   /'
started=$(date +%s.%N)
for _ in $(seq 1 100); do
  uid=$(kubectl get cronjob new-cron-object -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
  [ -n "$uid" ] && [ "$(kubectl get cronjob new-cron-object -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" = "" ] && break
  sleep 0.1
done
printf '   back after %.2f s:\n' "$(awk "BEGIN{print $(date +%s.%N) - $started}")"
kubectl get cronjob new-cron-object | sed 's/^/   /'
echo "   \$ kubectl get events --field-selector involvedObject.name=new-cron-object"
kubectl get events --field-selector involvedObject.name=new-cron-object | sed 's/^/   /'
explain "" "A lookup by a templated name (<crontab>-overrides): creating that ConfigMap suspends the CronJob."
if kubectl delete configmap new-cron-object-overrides --ignore-not-found | grep -q deleted; then # an earlier demo's
  for _ in $(seq 1 40); do
    [ "$(kubectl get cronjob new-cron-object -o jsonpath='{.spec.suspend}')" = false ] && break
    sleep 0.25
  done
fi
echo "   \$ kubectl create configmap new-cron-object-overrides --from-literal=suspend=true"
kubectl create configmap new-cron-object-overrides --from-literal=suspend=true | sed 's/^/   /'
for _ in $(seq 1 40); do
  [ "$(kubectl get cronjob new-cron-object -o jsonpath='{.spec.suspend}')" = true ] && break
  sleep 0.25
done
echo "   \$ kubectl get cronjob new-cron-object -o jsonpath='{.spec.suspend}'"
printf '   %s\n' "$(kubectl get cronjob new-cron-object -o jsonpath='{.spec.suspend}')"
explain "" "A Pod2 (user story 2's walkthrough) becomes a Pod and a ConfigMap:"
cat <<'YAML' | kubectl apply -f - | sed 's/^/   /'
apiVersion: samples.ruleplane.dev/v1alpha1
kind: Pod2
metadata: { name: hello, namespace: default }
spec: { image: "nginx:1.27", env: { GREETING: hello } }
YAML
for _ in $(seq 1 60); do
  kubectl get configmap hello-settings >/dev/null 2>&1 && break
  sleep 0.25
done
kubectl get pods,configmaps -l app.kubernetes.io/managed-by=ruleplane | sed 's/^/   /'
explain "(No kubelet runs in this control plane, so the Pod stays Pending.)"
explain "" "Parent data is untrusted: it fills in values, never structure (docs/security.md). A ConfigMap whose"
explain "team name tries to move its team card (examples/team-card.yaml) into kube-system:"
kubectl delete configmap sneaky --ignore-not-found >/dev/null
# shellcheck disable=SC2028 # the command as typed: \n stays two characters
echo "   \$ kubectl create configmap sneaky --from-literal=team=\$'x\\n  namespace: kube-system'"
kubectl create configmap sneaky --from-literal=team=$'x\n  namespace: kube-system' | sed 's/^/   /'
kubectl label configmap sneaky example.ruleplane.dev/team-card=yes | sed 's/^/   /'
for _ in $(seq 1 60); do
  kubectl get configmap sneaky-card >/dev/null 2>&1 && break
  sleep 0.25
done
echo "   \$ kubectl get configmap sneaky-card -o jsonpath='{.metadata.namespace} {.data.team}'"
printf '   %s\n' "$(kubectl get configmap sneaky-card -o jsonpath='{.metadata.namespace} {.data.team}')"
echo "   \$ kubectl get configmap sneaky-card -n kube-system"
kubectl get configmap sneaky-card -n kube-system 2>&1 | sed 's/^/   /' || true
explain "" "Labels can be copied, a signature cannot: the tenant copies the card's labels and annotation onto a"
explain "ConfigMap of its own. Ruleplane signs what it writes (an HMAC keyed by a Secret in the manager's"
explain "namespace), so the look-alike is neither read nor pruned when the parent changes:"
uid=$(kubectl get configmap sneaky -o jsonpath='{.metadata.uid}')
kubectl delete configmap sneaky-lookalike --ignore-not-found >/dev/null
cat <<YAML | kubectl apply -f - | sed 's/^/   /'
apiVersion: v1
kind: ConfigMap
metadata:
  name: sneaky-lookalike
  namespace: default
  labels: { app.kubernetes.io/managed-by: ruleplane, ruleplane.dev/rule: team-card, ruleplane.dev/parent-uid: "$uid", ruleplane.dev/child-id: card }
  annotations: { ruleplane.dev/parent: default/sneaky }
YAML
kubectl label configmap sneaky demo-touched="$(date +%s)" --overwrite >/dev/null
sleep 2
echo "   \$ kubectl get configmaps -l ruleplane.dev/rule=team-card -o custom-columns=NAME:.metadata.name,SIGNATURE:'.metadata.annotations.ruleplane\.dev/signature'"
kubectl get configmaps -l ruleplane.dev/rule=team-card \
  -o custom-columns=NAME:.metadata.name,SIGNATURE:'.metadata.annotations.ruleplane\.dev/signature' | sed 's/^/   /'

explain "" "Template helpers compute values (examples/network-plan.yaml): a /24 per zone with cidrSubnet, zones sorted and" \
  "deduplicated, replicas shared among them:"
kubectl delete configmap edge --ignore-not-found >/dev/null
echo "   \$ kubectl create configmap edge --from-literal=cidr=10.20.0.0/16 --from-literal=zones=b,a,b,c --from-literal=replicas=7"
kubectl create configmap edge --from-literal=cidr=10.20.0.0/16 --from-literal=zones=b,a,b,c --from-literal=replicas=7 | sed 's/^/   /'
kubectl label configmap edge example.ruleplane.dev/network-plan=yes >/dev/null
for _ in $(seq 1 60); do
  kubectl get configmap edge-plan >/dev/null 2>&1 && break
  sleep 0.25
done
echo "   \$ kubectl get configmap edge-plan -o jsonpath='{.data}'"
printf '   %s\n' "$(kubectl get configmap edge-plan -o jsonpath='{.data}')"

explain "" "Collections (examples/web-ports.yaml): a WebApp gets one Service per listed port (forEach); a port removed" \
  "from the list prunes its Service:"
kubectl wait --for=condition=Established crd/webapps.apps.example.org --timeout=30s >/dev/null 2>&1 || true
cat <<'YAML' | kubectl apply -f - | sed 's/^/   /'
apiVersion: apps.example.org/v1
kind: WebApp
metadata: { name: shop, namespace: default }
spec: { ports: [ { name: http, port: 80 }, { name: metrics, port: 9090 } ] }
YAML
for _ in $(seq 1 60); do
  [ "$(kubectl get services -l app.kubernetes.io/managed-by=ruleplane,ruleplane.dev/rule=web-ports -o name 2>/dev/null | wc -l)" -ge 2 ] && break
  sleep 0.25
done
kubectl get services -l ruleplane.dev/rule=web-ports | sed 's/^/   /'
echo "   \$ kubectl patch webapp shop --type=merge -p '{\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80}]}}'"
kubectl patch webapp shop --type=merge -p '{"spec":{"ports":[{"name":"http","port":80}]}}' | sed 's/^/   /'
for _ in $(seq 1 60); do
  [ "$(kubectl get services -l ruleplane.dev/rule=web-ports -o name 2>/dev/null | wc -l)" -le 1 ] && break
  sleep 0.25
done
kubectl get services -l ruleplane.dev/rule=web-ports | sed 's/^/   /'

explain "" "Fan-in (examples/service-ingress.yaml): one Ingress over every Service labelled expose=true; its parent is" \
  "the ConfigMap named exposed-services (for.name). Labelling a Service adds its rule, unlabelling removes it:"
kubectl delete configmap exposed-services --ignore-not-found >/dev/null
kubectl delete service front back --ignore-not-found >/dev/null
echo "   \$ kubectl create service clusterip front --tcp=80 && kubectl label service front expose=true"
kubectl create service clusterip front --tcp=80 | sed 's/^/   /'
kubectl label service front expose=true | sed 's/^/   /'
kubectl create service clusterip back --tcp=8080 >/dev/null
echo "   \$ kubectl create configmap exposed-services --from-literal=domain=shop.example.org"
kubectl create configmap exposed-services --from-literal=domain=shop.example.org | sed 's/^/   /'
ingress_hosts() { kubectl get ingress exposed-services -o jsonpath='{.spec.rules[*].host}' 2>/dev/null; }
for _ in $(seq 1 60); do
  [ -n "$(ingress_hosts)" ] && break
  sleep 0.25
done
echo "   \$ kubectl get ingress exposed-services -o jsonpath='{.spec.rules[*].host}'"
printf '   %s\n' "$(ingress_hosts)"
echo "   \$ kubectl label service back expose=true"
kubectl label service back expose=true | sed 's/^/   /'
for _ in $(seq 1 60); do
  case "$(ingress_hosts)" in *back.*) break ;; esac
  sleep 0.25
done
printf '   %s\n' "$(ingress_hosts)"
echo "   \$ kubectl label service front expose-"
kubectl label service front expose- | sed 's/^/   /'
for _ in $(seq 1 60); do
  case "$(ingress_hosts)" in *front.*) ;; *) break ;; esac
  sleep 0.25
done
printf '   %s\n' "$(ingress_hosts)"

explain "" "Partials, status expressions and recreate (examples/zoned-cache.yaml): a ZonedCache gets one Service per zone" \
  "and a warm-up Job, all labelled by the rule file's partial ({{> labels}}, from its TemplatePartials); its status" \
  "counts the zones whose Service has its address (ready.zones) and says it as a number, a text and a boolean:"
kubectl wait --for=condition=Established crd/zonedcaches.apps.example.org --timeout=30s >/dev/null 2>&1 || true
kubectl delete zonedcache cache --ignore-not-found --cascade=foreground --wait=true --timeout=30s >/dev/null 2>&1 || true # an earlier demo's
cat <<'YAML' | kubectl apply -f - | sed 's/^/   /' || true
apiVersion: apps.example.org/v1
kind: ZonedCache
metadata: { name: cache, namespace: default }
spec: { image: "redis:7.2", version: "7.10", zones: [a, b, c] }
YAML
for _ in $(seq 1 80); do
  [ "$(kubectl get zonedcache cache -o jsonpath='{.status.summary}' 2>/dev/null)" = "3/3 zones ready" ] && break
  sleep 0.25
done
echo "   \$ kubectl get services,jobs -l app.kubernetes.io/part-of=zoned-cache -L app.kubernetes.io/name,example.org/zone"
kubectl get services,jobs -l app.kubernetes.io/part-of=zoned-cache,app.kubernetes.io/name=cache \
  -L app.kubernetes.io/name,example.org/zone | sed 's/^/   /'
explain "" "The status without its conditions (version: \"7.10\" kept as text by type: string):"
echo "   \$ kubectl get zonedcache cache -o jsonpath='{.status}'    (conditions left out)"
kubectl get zonedcache cache -o json 2>/dev/null |
  python3 -c 'import json,sys; s=json.load(sys.stdin).get("status",{}); s.pop("conditions",None); print(json.dumps(s, separators=(",", ":")))' |
  sed 's/^/   /' || true
explain "" "A Job's Pod template is immutable. The warm-up Job says recreate: true, so a new image deletes the Job (with a" \
  "UID precondition: only the one this ZonedCache owns) and creates it anew, instead of reporting the refusal:"
cache_uid=$(kubectl get zonedcache cache -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
job_path='{.metadata.uid} {.spec.template.spec.containers[0].image}'
echo "   \$ kubectl get job cache-warmup -o jsonpath='$job_path'"
old_job=$(kubectl get job cache-warmup -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
printf '   %s\n' "$(kubectl get job cache-warmup -o jsonpath="$job_path" 2>/dev/null || true)"
echo "   \$ kubectl patch zonedcache cache --type=merge -p '{\"spec\":{\"image\":\"redis:7.4\"}}'"
kubectl patch zonedcache cache --type=merge -p '{"spec":{"image":"redis:7.4"}}' | sed 's/^/   /' || true
for _ in $(seq 1 160); do
  new_job=$(kubectl get job cache-warmup -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
  [ -n "$new_job" ] && [ "$new_job" != "$old_job" ] && break
  sleep 0.25
done
printf '   %s\n' "$(kubectl get job cache-warmup -o jsonpath="$job_path" 2>/dev/null || true)"
echo "   \$ kubectl get events --field-selector involvedObject.name=cache,reason=Recreated"
kubectl get events --field-selector "involvedObject.uid=$cache_uid,reason=Recreated" | sed 's/^/   /'

explain "" "Fields handed to other controllers (examples/scaled-app.yaml): a ScaledApp runs as a Deployment and an HPA" \
  "around it. The Deployment is created with spec.minReplicas replicas; then spec.replicas is the HPA's" \
  "(handOver: [spec.replicas]) and Ruleplane never writes it again. kube-controller-manager runs the HPA controller" \
  "here; with no metrics it only keeps the replicas within minReplicas..maxReplicas, checking every 15 s:"
kubectl wait --for=condition=Established crd/scaledapps.apps.example.org --timeout=30s >/dev/null 2>&1 || true
kubectl delete scaledapp api --ignore-not-found --cascade=foreground --wait=true --timeout=30s >/dev/null 2>&1 || true # an earlier demo's
kubectl delete pod api-manual --ignore-not-found --wait=true --timeout=30s >/dev/null 2>&1 || true
cat <<'YAML' | kubectl apply -f - | sed 's/^/   /' || true
apiVersion: apps.example.org/v1
kind: ScaledApp
metadata: { name: api, namespace: default }
spec: { image: "nginx:1.27", team: payments, minReplicas: 2, maxReplicas: 5 }
YAML
# spec.replicas of Deployment api, and the field managers that own it.
replicas() {
  kubectl get deployment api -o json --show-managed-fields 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
owners = [m["manager"] for m in d["metadata"].get("managedFields", [])
          if "f:replicas" in m.get("fieldsV1", {}).get("f:spec", {})]
print(d["spec"].get("replicas"), "(spec.replicas owned by " + (", ".join(owners) or "nobody") + ")")' 2>/dev/null || true
}
wait_replicas() { # count seconds
  for _ in $(seq 1 $(($2 * 4))); do
    case "$(replicas)" in "$1 "*) break ;; esac
    sleep 0.25
  done
}
wait_replicas 2 15
echo "   \$ kubectl get deployment api --show-managed-fields -o json    (spec.replicas and the managers owning it)"
printf '   %s\n' "$(replicas)"
explain "" "minReplicas raised to 3: Ruleplane updates the HPA, the HPA controller scales the Deployment:"
echo "   \$ kubectl patch scaledapp api --type=merge -p '{\"spec\":{\"minReplicas\":3}}'"
kubectl patch scaledapp api --type=merge -p '{"spec":{"minReplicas":3}}' | sed 's/^/   /' || true
hpa_started=$SECONDS
wait_replicas 3 60
printf '   %s    (after %d s)\n' "$(replicas)" $((SECONDS - hpa_started))
explain "" "minReplicas lowered to 1: the template now says replicas: 1, but the replicas stay the HPA's 3:"
echo "   \$ kubectl patch scaledapp api --type=merge -p '{\"spec\":{\"minReplicas\":1}}'"
kubectl patch scaledapp api --type=merge -p '{"spec":{"minReplicas":1}}' | sed 's/^/   /' || true
for _ in $(seq 1 60); do
  [ "$(kubectl get hpa api -o jsonpath='{.spec.minReplicas}' 2>/dev/null)" = 1 ] && break
  sleep 0.25
done
sleep 2
echo "   \$ kubectl get hpa api -o jsonpath='{.spec.minReplicas}'"
printf '   %s\n' "$(kubectl get hpa api -o jsonpath='{.spec.minReplicas}')"
printf '   %s\n' "$(replicas)"
explain "" "Patches: every Pod of the app gets its team label (only that label is Ruleplane's; the Pods are not). No" \
  "Deployment controller runs here, so a Pod of the app is created by hand (no kubelet either: it stays Pending):"
echo "   \$ kubectl run api-manual --image=nginx:1.27 --labels=app=api"
kubectl run api-manual --image=nginx:1.27 --labels=app=api | sed 's/^/   /' || true
for _ in $(seq 1 60); do
  [ "$(kubectl get pod api-manual -o jsonpath='{.metadata.labels.team}' 2>/dev/null)" = payments ] && break
  sleep 0.25
done
echo "   \$ kubectl get pods -l app=api -L team"
kubectl get pods -l app=api -L team | sed 's/^/   /'
api_uid=$(kubectl get scaledapp api -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
echo "   \$ kubectl get events --field-selector involvedObject.name=api,reason=Patched"
kubectl get events --field-selector "involvedObject.uid=$api_uid,reason=Patched" | sed 's/^/   /'
explain "" "Deleting the ScaledApp releases the patch (its finalizer applies an empty configuration under the patch's" \
  "field manager): the label goes, the Pod stays:"
echo "   \$ kubectl delete scaledapp api"
kubectl delete scaledapp api --wait=true --timeout=30s 2>&1 | sed 's/^/   /' || true
for _ in $(seq 1 60); do
  [ -z "$(kubectl get pod api-manual -o jsonpath='{.metadata.labels.team}' 2>/dev/null)" ] && break
  sleep 0.25
done
kubectl get pods -l app=api -L team | sed 's/^/   /'

say "6b. Kinds another tool installs: examples/other-tools/service-certificate.yaml"
explain "Its child (Certificate) and lookup (ClusterIssuer) are kinds of a cert-manager-like tool, declared by no" \
        "ResourceDefinition. The tool is not installed, so the rule waits and says so:"
echo "   \$ curl localhost:$health_port/readyz?verbose | grep service-certificate"
for _ in $(seq 1 40); do
  curl -fs "http://127.0.0.1:$health_port/readyz?verbose" | grep -q 'service-certificate (Reconciler): waiting' && break
  sleep 0.25
done
curl -fs "http://127.0.0.1:$health_port/readyz?verbose" | grep service-certificate | cut -c1-160 | sed 's/^/   /'
kubectl delete service web --ignore-not-found >/dev/null
echo "   \$ kubectl create service clusterip web --tcp=443 && kubectl label service web example.ruleplane.dev/tls=yes"
kubectl create service clusterip web --tcp=443 | sed 's/^/   /'
kubectl label service web example.ruleplane.dev/tls=yes | sed 's/^/   /'
explain "" "Now the tool's installer applies its CRDs (what its chart would do; Ruleplane never writes them):"
echo "   \$ kubectl apply -f examples/crds/"
kubectl apply -f "$root/examples/crds/" | sed 's/^/   /'
kubectl wait --for=condition=Established crd/certificates.certs.example.org crd/clusterissuers.certs.example.org \
  --timeout=30s >/dev/null
for _ in $(seq 1 60); do
  kubectl get certificates.certs.example.org web-tls >/dev/null 2>&1 && break
  sleep 0.25
done
explain "The rule started on its own (the shared watch of CRDs saw them established) and made the Certificate:"
echo "   \$ kubectl get certificates.certs.example.org web-tls -o jsonpath='{.spec.dnsNames} {.spec.duration}'"
printf '   %s\n' "$(kubectl get certificates.certs.example.org web-tls -o jsonpath='{.spec.dnsNames} {.spec.duration}')"
explain "" "The cluster-scoped ClusterIssuer it looks up sets the duration once it exists:"
cat <<'YAML' | kubectl apply -f - | sed 's/^/   /'
apiVersion: certs.example.org/v1
kind: ClusterIssuer
metadata: { name: default-issuer }
spec: { duration: 720h }
YAML
for _ in $(seq 1 40); do
  [ "$(kubectl get certificates.certs.example.org web-tls -o jsonpath='{.spec.duration}')" = 720h ] && break
  sleep 0.25
done
printf '   %s\n' "$(kubectl get certificates.certs.example.org web-tls -o jsonpath='{.spec.dnsNames} {.spec.duration}')"
echo "   \$ kubectl get crd certificates.certs.example.org -L app.kubernetes.io/managed-by"
kubectl get crd certificates.certs.example.org -L app.kubernetes.io/managed-by | sed 's/^/   /'
explain "(No managed-by label: the CRD stays the other tool's.)"

say "7. The SchedulerPolicy rules schedule pods beside kube-scheduler (user story 3)"
explain "Three nodes, and a fourth for batch work (KWOK plays their kubelet: bound pods run; docs/control-plane.md):"
for n in 1 2 3 4; do
  tier=$([ $n = 1 ] && echo gold || echo silver); cpu=$((n * 2)); taints="[]"
  [ $n = 4 ] && { tier=batch; cpu=1; taints="[ { key: dedicated, value: batch, effect: NoSchedule } ]"; }
  cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: v1
kind: Node
metadata: { name: demo-node-$n, labels: { kubernetes.io/hostname: demo-node-$n, tier: $tier, ruleplane.dev/kwok: "true" } }
spec: { taints: $taints }
status: { capacity: { cpu: "$cpu", memory: 8Gi, pods: "110" }, allocatable: { cpu: "$cpu", memory: 8Gi, pods: "110" } }
YAML
  # Admission puts a not-ready taint on new nodes; a kubelet would lift it.
  kubectl taint nodes "demo-node-$n" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
done
kubectl get nodes -L tier | sed 's/^/   /'
kubectl delete pods -l demo=scheduling --grace-period=0 --force --ignore-not-found >/dev/null 2>&1 || true
kubectl delete priorityclass demo-urgent --ignore-not-found >/dev/null 2>&1 || true
demo_pod() { # name scheduler cpu [extra spec lines]
  cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: { name: $1, namespace: default, labels: { demo: scheduling } }
spec:
  schedulerName: $2
  containers: [ { name: app, image: nginx, resources: { requests: { cpu: "$3", memory: 128Mi } } } ]
${4:-}
YAML
}
explain "" "The nginx pod of the story names my-scheduler; a pod naming a scheduler nobody runs stays Pending:"
demo_pod nginx my-scheduler 500m
demo_pod not-mine someone-else 100m
for _ in $(seq 1 40); do [ -n "$(kubectl get pod nginx -o jsonpath='{.spec.nodeName}')" ] && break; sleep 0.25; done
kubectl get pods nginx not-mine -o wide | awk '{print $1, $3, $7}' | column -t | sed 's/^/   /'
echo "   \$ kubectl get events --field-selector involvedObject.name=nginx"
kubectl get events --field-selector involvedObject.name=nginx,reason=Scheduled | sed 's/^/   /'
explain "" "A pod no node can hold gets kube-scheduler's FailedScheduling text, as an Event and a pod condition:"
demo_pod too-big my-scheduler 64
for _ in $(seq 1 40); do kubectl get pod too-big -o jsonpath='{.status.conditions[0].message}' 2>/dev/null | grep -q . && break; sleep 0.25; done
echo "   \$ kubectl get pod too-big -o jsonpath='{.status.conditions[0].message}'"
printf '   %s\n' "$(kubectl get pod too-big -o jsonpath='{.status.conditions[0].reason}: {.status.conditions[0].message}')"
explain "" "Bin-packing (bin-packing-scheduler) fills the fullest node; kube-scheduler's default profile as" \
        "spread-scheduler spreads over the least used ones:"
for i in 1 2 3; do demo_pod "packed-$i" bin-packing-scheduler 200m; done
for i in 1 2 3; do demo_pod "spread-$i" spread-scheduler 200m; done
sleep 2
kubectl get pods -l demo=scheduling -o custom-columns=POD:.metadata.name,SCHEDULER:.spec.schedulerName,NODE:.spec.nodeName,PHASE:.status.phase | sed 's/^/   /'
explain "" "Preemption, as kube-scheduler's DefaultPreemption: a batch pod of priority 0 fills demo-node-4; a pod of a" \
        "higher PriorityClass evicts it (bin-packing-scheduler limits victims to pods Ruleplane's policies placed):"
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: { name: demo-urgent }
value: 1000
YAML
batch_spec="  nodeSelector: { tier: batch }
  tolerations: [ { key: dedicated, value: batch, effect: NoSchedule } ]"
demo_pod batch-job bin-packing-scheduler 800m "$batch_spec"
for _ in $(seq 1 40); do [ "$(kubectl get pod batch-job -o jsonpath='{.status.phase}')" = Running ] && break; sleep 0.25; done
demo_pod urgent bin-packing-scheduler 500m "$batch_spec
  priorityClassName: demo-urgent"
for _ in $(seq 1 80); do [ "$(kubectl get pod urgent -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ] && break; sleep 0.25; done
echo "   \$ kubectl get events --field-selector involvedObject.name=batch-job,reason=Preempted"
kubectl get events --field-selector involvedObject.name=batch-job,reason=Preempted | sed 's/^/   /'
kubectl get pods -l demo=scheduling -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase \
  --field-selector spec.nodeName=demo-node-4 | sed 's/^/   /'
explain "(batch-job is gone: KWOK removed it once deleted, as a kubelet would.)"
explain "" "Gangs (the Workload API: PodGroups of scheduling.k8s.io/v1beta1 on 1.37, the local plane serves it):" \
        "gang-scheduler places a pod group all or nothing. tests/scheduler/gang/gang-jobs.yaml has two gangs of" \
        "three; too-big cannot fit whole:"
kubectl delete podgroups.scheduling.k8s.io training too-big --ignore-not-found >/dev/null 2>&1 || true
kubectl apply -f "$root/tests/scheduler/gang/gang-jobs.yaml" >/dev/null
for _ in $(seq 1 40); do
  [ "$(kubectl get pods -l gang=training -o jsonpath='{.items[*].spec.nodeName}' | wc -w)" = 3 ] && break; sleep 0.25
done
sleep 1
kubectl get pods -l gang -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName | sed 's/^/   /'
echo "   \$ kubectl get events --field-selector reason=GangRejected"
kubectl get events --field-selector involvedObject.name=too-big-0,reason=GangRejected -o custom-columns=REASON:.reason,MESSAGE:.message \
  | sed 's/^/   /'
explain "" "Volumes: a claim of a WaitForFirstConsumer StorageClass and a local PersistentVolume on demo-node-2;" \
        "spread-scheduler (kube-scheduler's default profile) picks the volume's node, binds the volume to the claim" \
        "(VolumeBinding's PreBind), waits for the claim to be bound, then binds the pod:"
kubectl delete pod db --ignore-not-found --grace-period=0 --force >/dev/null 2>&1 || true
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: { name: demo-local }
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: { name: demo-pv }
spec:
  capacity: { storage: 1Gi }
  accessModes: [ ReadWriteOnce ]
  storageClassName: demo-local
  local: { path: /mnt/disks/demo }
  nodeAffinity:
    required: { nodeSelectorTerms: [ { matchExpressions: [ { key: kubernetes.io/hostname, operator: In, values: [ demo-node-2 ] } ] } ] }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: demo-data, namespace: default }
spec: { storageClassName: demo-local, accessModes: [ ReadWriteOnce ], resources: { requests: { storage: 1Gi } } }
YAML
demo_pod db spread-scheduler 100m "  volumes: [ { name: data, persistentVolumeClaim: { claimName: demo-data } } ]"
for _ in $(seq 1 80); do [ -n "$(kubectl get pod db -o jsonpath='{.spec.nodeName}')" ] && break; sleep 0.25; done
kubectl get pvc demo-data -o custom-columns=CLAIM:.metadata.name,STATUS:.status.phase,VOLUME:.spec.volumeName | sed 's/^/   /'
kubectl get pod db -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase | sed 's/^/   /'
explain "" "The same engine runs offline: ruleplane simulate (what-if on nodes and pods from files, kubectl get -o yaml):"
echo "   \$ ruleplane simulate --policy examples/my-scheduler.yaml --nodes nodes.yaml --pods pods.yaml --existing existing.yaml"
"$target/debug/ruleplane" simulate --policy "$root/examples/my-scheduler.yaml" --nodes "$root/tests/scheduler/simulate/nodes.yaml" \
  --pods "$root/tests/scheduler/simulate/pods.yaml" --existing "$root/tests/scheduler/simulate/existing.yaml" --seed 1 | sed 's/^/   /'
explain "" "make test checks verdicts and messages against the real kube-scheduler of the plane's version (1.37;" \
        "make test-matrix: 1.35 and 1.36) on random corpora."

say "8. Reviewing a rule change: ruleplane diff shows what it would do to the cluster, writing nothing"
review=$(mktemp -d -t ruleplane-review.XXXXXX)
cp "$root/examples/"*.yaml "$review/"
rm -f "$review/"*.test.yaml
# The change under review: CronJobs get a history limit.
sed -i 's/^          concurrencyPolicy: \(.*\)$/          concurrencyPolicy: \1\n          successfulJobsHistoryLimit: 1/' "$review/crontab.yaml"
echo "   \$ ruleplane diff --rules changed-rules/ --manager-namespace default    (crontab.yaml: + successfulJobsHistoryLimit: 1)"
"$target/debug/ruleplane" diff --rules "$review" --manager-namespace default --kubeconfig "$KUBECONFIG" | sed 's/^/   /' || true
rm -rf "$review"

say "9. A second replica shares the work (active-active; docs/operations.md)"
metrics_port2=$(free_port); health_port2=$(free_port); log2=$(mktemp -t ruleplane-demo-2.XXXXXX.log)
echo "   \$ ruleplane run --rules examples/ --identity demo-2 ...    (log: $log2)"
"$target/debug/ruleplane" run --rules "$root/examples" --crds "$root/examples/crds" --kubeconfig "$KUBECONFIG" \
  --metrics-bind-address "127.0.0.1:$metrics_port2" --health-probe-bind-address "127.0.0.1:$health_port2" \
  --leader-election-namespace default --identity demo-2 >"$log2" 2>&1 &
second=$!
trap 'kill $manager $second 2>/dev/null || true; wait $manager $second 2>/dev/null || true' EXIT
units_of() { curl -fs "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '/^ruleplane_unit_owned\{/ && $2=="1"{n++} END{print n+0}'; }
for _ in $(seq 1 120); do
  [ "$(units_of "$metrics_port")" = 17 ] && [ "$(units_of "$metrics_port2")" = 17 ] && break
  sleep 0.25
done
echo "   \$ kubectl get leases -n default -o custom-columns=HOLDER:.spec.holderIdentity --no-headers | sort | uniq -c"
kubectl get leases -n default -o custom-columns=HOLDER:.spec.holderIdentity --no-headers | grep -E '^demo' | sort | uniq -c |
  sed 's/^/   /'
echo "   \$ curl localhost:$health_port/readyz?verbose | grep units; curl localhost:$health_port2/readyz?verbose | grep units"
for port in "$health_port" "$health_port2"; do
  curl -fs "http://127.0.0.1:$port/readyz?verbose" | grep units-known | sed 's/^/   /'
done
echo "   \$ kubectl get cronjobs,configmaps -l app.kubernetes.io/managed-by=ruleplane -L ruleplane.dev/shard | head -5"
kubectl get cronjobs,configmaps -l app.kubernetes.io/managed-by=ruleplane -L ruleplane.dev/shard | awk 'NR <= 5' | sed 's/^/   /'
explain "" "Each replica runs 17 of the 34 units (the 18th Lease each holds is its member Lease): Reconciler parents are" \
  "hashed into 32 shards, and each child carries" \
  "its parent's shard so a replica's watches receive only its own children. The ResourceDefinitions and the" \
  "SchedulerPolicies are one unit each, on different replicas."
echo "   \$ kill -TERM <demo-2>    (a rolling update, a scale-down)"
t_term=$(date +%s.%N)
kill -TERM $second; wait $second || true
for _ in $(seq 1 200); do [ "$(units_of "$metrics_port")" = 34 ] && break; sleep 0.05; done
explain "demo-2 handed its units back; demo runs all 34 again after $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t_term}") s" \
  "(a replica that dies instead loses them when their Leases expire, 15 s)."
trap 'kill $manager 2>/dev/null || true; wait $manager 2>/dev/null || true' EXIT

say "10. Health and metrics"
echo "   \$ curl localhost:$health_port/readyz?verbose"
curl -fs "http://127.0.0.1:$health_port/readyz?verbose" | sed 's/^/   /'
echo "   \$ curl localhost:$metrics_port/metrics | grep -E 'ruleplane_(members|rules_loaded|reconciles_total)'"
curl -fs "http://127.0.0.1:$metrics_port/metrics" |
  grep -E '^ruleplane_(members|rules_loaded|reconciles_total)' | sed 's/^/   /'
explain "" "What the CronTab rule holds in memory: its parents, its labelled children, the identities (not the content)" \
  "of the ConfigMaps its overrides lookup may read, and the content of those a CronTab does read:"
echo "   \$ curl localhost:$metrics_port/metrics | grep -E 'ruleplane_(watch_objects|lookup_contents).*(CronTab|CronJob|ConfigMap|crontab)'"
curl -fs "http://127.0.0.1:$metrics_port/metrics" |
  grep -E '^ruleplane_(watch_objects|lookup_contents).*(CronTab|CronJob|ConfigMap|crontab)' | sed 's/^/   /'

say "11. Stopping the manager (SIGTERM): workers stop, the units' Leases are released"
kill -TERM $manager
wait $manager && explain "manager exited with status 0"
trap - EXIT
if [ -n "${RULEPLANE_CLUSTER_DIR:-}" ]; then stop_plane="tests/control-plane/cluster.sh down --dir $cluster_dir"
else stop_plane="make cluster-down"; fi
explain "The CRDs, the CronTab and its CronJob stay: nothing is deleted implicitly." \
        "The control plane keeps running for you:" "  export KUBECONFIG=$KUBECONFIG" "  $stop_plane    # to stop it"

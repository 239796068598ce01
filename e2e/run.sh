#!/usr/bin/env bash
# End-to-end: kind cluster → image → helm install → the same examples and checks as the
# cluster-free release test (test/release/release.test.ts): examples/k8s applied into the release
# namespace and Ready, the example playbook through the API and the CLI with its documented result,
# printer columns, kubectl scale on the WorkerPool, queue-driven scaling, a helm upgrade that keeps
# the worker count and the generated secrets, helm test, no RBAC denial in the operator's log,
# uninstall keeping the CRDs. Needs docker, kind, kubectl, helm and curl on the PATH, and a built
# repository (npm ci && npm run build). Prints why it is skipped when a prerequisite is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${E2E_CLUSTER:-playflow-e2e}
NS=${E2E_NAMESPACE:-playflow-e2e}
IMAGE=${E2E_IMAGE:-playflow:e2e}
# `playflow`: the release name examples/k8s/workerpool.yaml's statefulSetName assumes.
RELEASE=${E2E_RELEASE:-playflow}
KEEP=${E2E_KEEP:-0}
# What examples/k8s/playbook.yaml computes (the release test checks the same).
EXPECTED='{"hot_cities":["Paris","Madrid"],"checked":3}'

for tool in docker kind kubectl helm curl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "e2e skipped: '$tool' is not on the PATH (needs docker, kind, kubectl, helm, curl)"
    exit 0
  fi
done
if ! docker info >/dev/null 2>&1; then
  echo "e2e skipped: no Docker engine answers 'docker info'"
  exit 0
fi

log() { printf '\n== %s\n' "$*"; }
cleanup() {
  if [ "$KEEP" != "1" ]; then
    log "deleting cluster $CLUSTER"
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

FULL="$RELEASE-playflow"
[[ "$RELEASE" == *playflow* ]] && FULL="$RELEASE"
WORKERS_STS="$FULL-worker"
POOL="$FULL-workers"
HELM_ARGS=(--namespace "$NS"
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=Never
  --set server.service.type=NodePort --set server.replicas=1
  --set worker.pool.minReplicas=1 --set worker.pool.maxReplicas=3
  --set worker.pool.targetQueueDepthPerReplica=5 --set worker.pool.scaleDownStabilizationSeconds=20)

log "creating kind cluster $CLUSTER"
kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --config e2e/kind.yaml --wait 120s

log "building and loading image $IMAGE"
docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "helm install $RELEASE (pre-install Job generates the secrets; CRDs are templates)"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f -
helm upgrade --install "$RELEASE" helm/playflow "${HELM_ARGS[@]}" --wait --timeout 5m
kubectl -n "$NS" patch svc "$FULL-server" --type merge \
  -p '{"spec":{"ports":[{"name":"http","port":8082,"targetPort":"http","nodePort":30082}]}}'
export SERVER_API_URL=http://127.0.0.1:30082
PLAYFLOW="node dist/cli/index.js"

log "waiting for the server"
for _ in $(seq 1 60); do curl -fsS "$SERVER_API_URL/health" >/dev/null 2>&1 && break; sleep 2; done
curl -fsS "$SERVER_API_URL/health"

log "applying examples/k8s into $NS and waiting for Ready"
kubectl -n "$NS" apply -f examples/k8s/credential.yaml -f examples/k8s/playbook.yaml
kubectl -n "$NS" wait --for=condition=Ready playbook/weather-report --timeout=120s
kubectl -n "$NS" wait --for=condition=Ready credential/analytics-db --timeout=120s
PB_PATH=$(kubectl -n "$NS" get playbook/weather-report -o jsonpath='{.status.catalogPath}')
echo "catalog path: $PB_PATH"
[ "$PB_PATH" = "examples/weather-report" ]

log "kubectl get playbooks shows the printer columns"
kubectl -n "$NS" get playbooks | tee /tmp/playflow-e2e-get.txt
head -1 /tmp/playflow-e2e-get.txt | grep -Eq '^NAME +READY +PATH +VERSION +AGE$'
grep -Eq '^weather-report +True +examples/weather-report +[0-9]+ ' /tmp/playflow-e2e-get.txt

same_json() { node -e 'const [a, b] = process.argv.slice(1).map((s) => JSON.stringify(JSON.parse(s))); process.exit(a === b ? 0 : 1)' "$1" "$2"; }

log "running it through the API"
EXEC_ID=$(curl -fsS -X POST "$SERVER_API_URL/api/run/playbook" -H 'content-type: application/json' \
  -d "{\"path\":\"$PB_PATH\",\"payload\":{}}" | node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>console.log(JSON.parse(s).execution_id))')
for _ in $(seq 1 60); do
  BODY=$(curl -fsS "$SERVER_API_URL/api/execution/$EXEC_ID")
  STATUS=$(node -e 'console.log(JSON.parse(process.argv[1]).status)' "$BODY")
  [ "$STATUS" = completed ] || [ "$STATUS" = failed ] && break; sleep 1
done
echo "$BODY"
[ "$STATUS" = completed ]
same_json "$(node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).result))' "$BODY")" "$EXPECTED"

log "running it through the CLI"
$PLAYFLOW run playbook "$PB_PATH" --payload '{}' --wait --output json | tee /tmp/playflow-e2e-run.json
grep -q '"status": *"completed"' /tmp/playflow-e2e-run.json
same_json "$(node -e 'console.log(JSON.stringify(JSON.parse(require("fs").readFileSync(0, "utf8")).result))' < /tmp/playflow-e2e-run.json)" "$EXPECTED"

sts_replicas() { kubectl -n "$NS" get statefulset "$WORKERS_STS" -o jsonpath='{.spec.replicas}'; }

log "kubectl scale on the WorkerPool pins the worker count"
kubectl -n "$NS" scale "workerpool/$POOL" --replicas=3
for _ in $(seq 1 60); do [ "$(sts_replicas)" = 3 ] && break; sleep 2; done
[ "$(sts_replicas)" = 3 ]

log "helm upgrade keeps the worker count and the generated secrets"
SECRETS_BEFORE=$(kubectl -n "$NS" get secrets -l app.kubernetes.io/created-by=playflow-ensure-secrets -o jsonpath='{range .items[*]}{.metadata.name}={.data}{"\n"}{end}')
[ -n "$SECRETS_BEFORE" ]
helm upgrade "$RELEASE" helm/playflow "${HELM_ARGS[@]}" --wait --timeout 5m
[ "$(sts_replicas)" = 3 ]
SECRETS_AFTER=$(kubectl -n "$NS" get secrets -l app.kubernetes.io/created-by=playflow-ensure-secrets -o jsonpath='{range .items[*]}{.metadata.name}={.data}{"\n"}{end}')
[ "$SECRETS_BEFORE" = "$SECRETS_AFTER" ]

log "WorkerPool scaling from the queue: unpin, queue 40 commands and watch the StatefulSet grow"
kubectl -n "$NS" patch "workerpool/$POOL" --type merge -p '{"spec":{"replicas":null}}'
$PLAYFLOW catalog register playbook e2e/playbooks/fanout.yaml
$PLAYFLOW run playbook e2e/fanout --payload '{"items": 40}'
for _ in $(seq 1 60); do
  R=$(sts_replicas)
  [ "$R" -gt 1 ] && break; sleep 2
done
echo "worker replicas under load: $R"
[ "$R" -gt 1 ]
log "waiting for the scale-down after the window"
for _ in $(seq 1 90); do
  R=$(sts_replicas)
  [ "$R" -eq 1 ] && break; sleep 2
done
echo "worker replicas after drain: $R"
[ "$R" -eq 1 ]

log "helm test"
helm test "$RELEASE" --namespace "$NS" --timeout 3m

log "the operator was never denied by RBAC"
if kubectl -n "$NS" logs "deployment/$FULL-operator" --all-containers --prefix | grep -i 'forbidden'; then
  echo "the operator logged RBAC denials"; exit 1
fi

log "uninstall"
kubectl -n "$NS" delete -f examples/k8s/playbook.yaml -f examples/k8s/credential.yaml --wait=true --timeout=60s
helm uninstall "$RELEASE" --namespace "$NS" --wait
kubectl get crd playbooks.playflow.io >/dev/null   # crds.keep: the CRDs stay
echo "e2e passed"

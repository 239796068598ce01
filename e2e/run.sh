#!/usr/bin/env bash
# End-to-end: kind cluster → image → helm install → Playbook CR → run through the CLI →
# WorkerPool scaling → uninstall. Needs docker, kind, kubectl and helm on the PATH, and a built
# repository (npm ci && npm run build). Prints why it is skipped when a prerequisite is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${E2E_CLUSTER:-playflow-e2e}
NS=${E2E_NAMESPACE:-playflow-e2e}
IMAGE=${E2E_IMAGE:-playflow:e2e}
RELEASE=${E2E_RELEASE:-pf}
KEEP=${E2E_KEEP:-0}

for tool in docker kind kubectl helm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "e2e skipped: '$tool' is not on the PATH (needs docker, kind, kubectl, helm)"
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

log "creating kind cluster $CLUSTER"
kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --config e2e/kind.yaml --wait 120s

log "building and loading image $IMAGE"
docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "helm install $RELEASE"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f -
helm upgrade --install "$RELEASE" helm/playflow --namespace "$NS" \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=Never \
  --set server.service.type=NodePort --set server.replicas=1 \
  --set worker.replicas=1 --set worker.pool.minReplicas=1 --set worker.pool.maxReplicas=3 \
  --set worker.pool.targetQueueDepthPerReplica=5 --set worker.pool.scaleDownStabilizationSeconds=20 \
  --wait --timeout 5m
kubectl -n "$NS" patch svc "$RELEASE-playflow-server" --type merge \
  -p '{"spec":{"ports":[{"name":"http","port":8082,"targetPort":"http","nodePort":30082}]}}'
export SERVER_API_URL=http://127.0.0.1:30082
PLAYFLOW="node dist/cli/index.js"

log "waiting for the server"
for _ in $(seq 1 60); do curl -fsS "$SERVER_API_URL/health" >/dev/null 2>&1 && break; sleep 2; done
curl -fsS "$SERVER_API_URL/health"

log "applying the example Playbook custom resource"
kubectl -n "$NS" apply -f examples/k8s/playbook.yaml
PB=$(kubectl -n "$NS" get -f examples/k8s/playbook.yaml -o jsonpath='{.metadata.name}')
kubectl -n "$NS" wait --for=condition=Ready "playbook/$PB" --timeout=120s
PB_PATH=$(kubectl -n "$NS" get "playbook/$PB" -o jsonpath='{.status.catalogPath}')
echo "catalog path: $PB_PATH"

log "running it through the CLI"
$PLAYFLOW run playbook "$PB_PATH" --payload '{}' --wait --output json | tee /tmp/playflow-e2e-run.json
grep -q '"status": *"completed"' /tmp/playflow-e2e-run.json

log "WorkerPool scaling: queue 40 commands and watch the StatefulSet grow"
$PLAYFLOW catalog register playbook e2e/playbooks/fanout.yaml
$PLAYFLOW run playbook e2e/fanout --payload '{"items": 40}'
for _ in $(seq 1 60); do
  R=$(kubectl -n "$NS" get statefulset "$RELEASE-playflow-worker" -o jsonpath='{.spec.replicas}')
  [ "$R" -gt 1 ] && break; sleep 2
done
echo "worker replicas under load: $R"
[ "$R" -gt 1 ]
log "waiting for the scale-down after the window"
for _ in $(seq 1 90); do
  R=$(kubectl -n "$NS" get statefulset "$RELEASE-playflow-worker" -o jsonpath='{.spec.replicas}')
  [ "$R" -eq 1 ] && break; sleep 2
done
echo "worker replicas after drain: $R"
[ "$R" -eq 1 ]

log "helm test"
helm test "$RELEASE" --namespace "$NS" --timeout 3m

log "uninstall"
kubectl -n "$NS" delete -f examples/k8s/playbook.yaml --wait=true --timeout=60s
helm uninstall "$RELEASE" --namespace "$NS" --wait
kubectl get crd playbooks.playflow.io >/dev/null   # CRDs are kept on uninstall
echo "e2e passed"

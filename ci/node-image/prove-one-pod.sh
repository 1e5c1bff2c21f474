#!/usr/bin/env bash
# Feasibility proof of a kind-style node on this machine: one node container (the image of
# ci/node-image/build.sh) whose containerd + kubelet run one pod, joined to a control plane
# made of the project's own binaries (ci/install-control-plane.sh) in a second container on
# the same docker network. Exits 0 when the pod is Running and Ready, its log and an exec
# through the apiserver work, and a second, privileged pod's mount under /var/lib/kubelet
# (Bidirectional propagation, as CSI node plugins need) reaches the node. Removes everything
# it started (containers with their volumes, network, the node's cgroups, temp files) unless
# KEEP=1.
#
# Environment: NODE_IMAGE (default: the output of build.sh), SNAPSHOTTER (overlayfs),
#   SYSCTL_SHIM (1; 0 shows what kubelet does without it, see files/node-entrypoint.sh), KEEP=1 (leave it all running and print how to clean up), NAME (ocsc-kind-proof).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../lib.sh"

name=${NAME:-ocsc-kind-proof}
net=$name
cp=$name-control-plane
node=$name-worker
: "${SNAPSHOTTER:=overlayfs}"
started=$SECONDS

image=${NODE_IMAGE:-$("$here/build.sh")}
bin=$("$here/../install-control-plane.sh")
work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")

# The node's cgroups live in the host's v1 hierarchies (bind-mounted rw): they outlive the
# container and must be removed here, deepest first, once its processes are gone.
remove_cgroups() {
    local h
    for h in /sys/fs/cgroup/*/; do
        [ -d "$h$node" ] && find "$h$node" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
}
cleanup() {
    local rc=$?
    if [ "${KEEP:-}" = 1 ]; then
        step "KEEP=1: left running; clean up with: docker rm -f -v $node $cp; docker network rm $net;" \
            "rmdir the /sys/fs/cgroup/*/$node trees; rm -rf $work"
        exit $rc
    fi
    step "cleaning up"
    docker rm -f -v "$node" "$cp" >/dev/null 2>&1 || true
    remove_cgroups
    docker network rm "$net" >/dev/null 2>&1 || true
    rm -rf "$work"
    local left
    left=$(find /sys/fs/cgroup/*/ -maxdepth 1 -name "$node" 2>/dev/null || true)
    [ -z "$left" ] || step "warning: cgroups left behind: $left"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
diagnose() {
    step "--- node container (docker logs, last 40 lines) ---"
    docker logs --tail 40 "$node" 2>&1 || true
    step "--- node container: entrypoint lines and kubelet's fatal errors ---"
    docker logs "$node" 2>&1 | grep -E '^(node-entrypoint|F[0-9]{4} )' | cut -c1-600 || true
    step "--- containerd log (last 20 lines) ---"
    docker exec "$node" tail -n 20 /var/log/node/containerd.log 2>&1 || true
    step "--- control plane logs (last 10 lines each) ---"
    docker exec "$cp" sh -c 'for f in /var/log/cp/*.log; do echo "== $f"; tail -n 10 "$f"; done' 2>&1 || true
}

# Leftovers of an interrupted earlier run with the same name.
docker rm -f -v "$node" "$cp" >/dev/null 2>&1 || true
remove_cgroups
docker network rm "$net" >/dev/null 2>&1 || true

# --- certificates, tokens, kubeconfigs -----------------------------------------------------
step "control plane: CA, serving certificate, tokens (in $work/pki)"
pki="$work/pki"
mkdir -p "$pki"
(
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
        -subj "/CN=$name-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
        -subj /CN=kube-apiserver 2>/dev/null
    printf 'subjectAltName=DNS:%s,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:localhost,IP:127.0.0.1,IP:10.96.0.1\nextendedKeyUsage=serverAuth\n' \
        "$cp" >san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile san.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
)
admin_token=$(openssl rand -hex 16)
node_token=$(openssl rand -hex 16)
cat >"$pki/tokens.csv" <<EOF
$admin_token,admin,uid-admin,"system:masters"
$node_token,system:node:$node,uid-$node,"system:nodes"
EOF
kubeconfig() { # SERVER TOKEN
    cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: $1
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: u
  user:
    token: $2
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
EOF
}
kubeconfig https://127.0.0.1:6443 "$admin_token" >"$pki/admin.conf"
cat >"$pki/run-control-plane.sh" <<'EOF'
#!/bin/bash
# The control plane of the proof: the project's binaries (/opt/cp/bin, read-only).
set -u
b=/opt/cp/bin p=/etc/kubernetes/pki
mkdir -p /var/log/cp /var/lib/etcd
"$b/etcd" --data-dir /var/lib/etcd --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    >/var/log/cp/etcd.log 2>&1 &
"$b/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 --bind-address=0.0.0.0 \
    --secure-port=6443 --insecure-port=0 --tls-cert-file=$p/apiserver.crt \
    --tls-private-key-file=$p/apiserver.key --client-ca-file=$p/ca.crt \
    --token-auth-file=$p/tokens.csv --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --service-cluster-ip-range=10.96.0.0/16 \
    --service-account-key-file=$p/sa.pub --service-account-signing-key-file=$p/sa.key \
    --service-account-issuer=https://kubernetes.default.svc --allow-privileged=true \
    --kubelet-preferred-address-types=InternalIP >/var/log/cp/kube-apiserver.log 2>&1 &
for _ in $(seq 1 120); do
    "$b/kubectl" --kubeconfig $p/admin.conf get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.5
done
"$b/kube-controller-manager" --kubeconfig=$p/admin.conf --controllers='*' --leader-elect=false \
    --service-account-private-key-file=$p/sa.key --root-ca-file=$p/ca.crt --port=0 \
    >/var/log/cp/kube-controller-manager.log 2>&1 &
"$b/kube-scheduler" --kubeconfig=$p/admin.conf --leader-elect=false --port=0 \
    >/var/log/cp/kube-scheduler.log 2>&1 &
wait -n
echo "a control-plane process exited"
exit 1
EOF
chmod +x "$pki/run-control-plane.sh"

# --- network and control plane -------------------------------------------------------------
step "docker network $net"
docker network create "$net" >/dev/null
step "control plane container $cp (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)"
docker run -d --name "$cp" --hostname "$cp" --network "$net" \
    -v "$bin:/opt/cp/bin:ro" -v "$pki:/etc/kubernetes/pki:ro" \
    --entrypoint /etc/kubernetes/pki/run-control-plane.sh "$image" >/dev/null
kubectl() { docker exec -i "$cp" /opt/cp/bin/kubectl --kubeconfig /etc/kubernetes/pki/admin.conf "$@"; }
for _ in $(seq 1 120); do
    kubectl get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.5
done
kubectl get --raw /readyz >/dev/null || { diagnose; fail "control plane not ready"; }
step "control plane ready ($(kubectl version --short 2>/dev/null | tail -n 1))"

# --- node ----------------------------------------------------------------------------------
step "node container $node ($image, snapshotter $SNAPSHOTTER)"
mkdir -p "$work/node"
kubeconfig "https://$cp:6443" "$node_token" >"$work/node/kubelet.conf"
cat >"$work/node/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
staticPodPath: /etc/kubernetes/manifests
clusterDomain: cluster.local
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
imageGCHighThresholdPercent: 100
EOF
cat >"$work/node/kubelet.flags" <<EOF
--kubeconfig=/etc/kubernetes/kubelet.conf
--config=/etc/kubernetes/kubelet-config.yaml
--container-runtime=remote
--container-runtime-endpoint=unix:///run/containerd/containerd.sock
--pod-infra-container-image=localhost/openstack-csi-conformance/pause:3.4
--hostname-override=$node
--v=2
EOF
# Not --privileged (the engine cannot grant CAP_SYS_RESOURCE here: "unable to apply caps");
# every capability the engine knows except that one, no seccomp filter, the host's cgroup v1
# hierarchies, /dev/kmsg for kubelet's OOM watcher, and /var on a volume (not on the
# engine's fuse-overlayfs) for containerd's snapshots, as kind does.
modules=()
[ -d /lib/modules ] && modules=(-v /lib/modules:/lib/modules:ro)
docker create --name "$node" --hostname "$node" --network "$net" \
    --cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined \
    --tmpfs /run --tmpfs /tmp -v /var -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
    "${modules[@]}" --device /dev/kmsg --device /dev/fuse \
    -e SNAPSHOTTER="$SNAPSHOTTER" -e SYSCTL_SHIM="${SYSCTL_SHIM:-1}" -e POD_SUBNET=10.244.1.0/24 -e CGROUP_ROOT="/$node" \
    "$image" >/dev/null
docker cp "$work/node/." "$node:/etc/kubernetes/"
docker start "$node" >/dev/null

step "waiting for node $node to be Ready"
ready=
for _ in $(seq 1 90); do
    if [ "$(kubectl get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; then
        ready=1
        break
    fi
    docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null | grep -q true || break
    sleep 2
done
[ -n "$ready" ] || { kubectl get node -o wide 2>&1 || true; kubectl describe node "$node" 2>&1 | tail -n 30 || true; diagnose; fail "node $node not Ready"; }
kubectl get node -o wide

# --- one pod ---------------------------------------------------------------------------------
step "one pod (busybox image imported into the node's containerd, bridge CNI)"
for _ in $(seq 1 60); do
    kubectl get serviceaccount default >/dev/null 2>&1 && break
    sleep 1
done
kubectl apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: proof}
spec:
  containers:
  - name: busybox
    image: localhost/openstack-csi-conformance/busybox:bookworm
    imagePullPolicy: Never
    command: [sh, -c, 'echo "hello from $(hostname)"; ip -4 -o addr show eth0; exec sleep 3600']
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 2
EOF
if ! kubectl wait --for=condition=Ready pod/proof --timeout=180s; then
    kubectl describe pod proof 2>&1 | tail -n 30 || true
    diagnose
    fail "pod not Ready"
fi
kubectl get pod proof -o wide
step "pod log (kubectl logs, through the apiserver and the node's kubelet)"
kubectl logs proof
step "kubectl exec proof -- cat /proc/1/cgroup (first lines)"
kubectl exec proof -- sh -c 'head -n 3 /proc/1/cgroup'
step "in the node: containerd's tasks"
docker exec "$node" ctr -n k8s.io tasks ls

# What CSI node plugins need beyond that: a privileged container whose mount, made under a
# hostPath with Bidirectional propagation, shows up in the node's mount namespace.
step "a privileged pod mounting under /var/lib/kubelet with Bidirectional propagation"
kubectl apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: privileged-mounter}
spec:
  containers:
  - name: busybox
    image: localhost/openstack-csi-conformance/busybox:bookworm
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /kubelet/proof-mnt && mount -t tmpfs proof-mnt /kubelet/proof-mnt && echo mounted && exec sleep 3600']
    securityContext: {privileged: true}
    volumeMounts:
    - {name: kubelet, mountPath: /kubelet, mountPropagation: Bidirectional}
  volumes:
  - name: kubelet
    hostPath: {path: /var/lib/kubelet, type: Directory}
EOF
if ! kubectl wait --for=condition=Ready pod/privileged-mounter --timeout=120s; then
    kubectl describe pod privileged-mounter 2>&1 | tail -n 20 || true
    diagnose
    fail "privileged pod not Ready"
fi
for _ in $(seq 1 20); do
    docker exec "$node" grep -q ' /var/lib/kubelet/proof-mnt ' /proc/self/mountinfo && break
    sleep 0.5
done
docker exec "$node" grep ' /var/lib/kubelet/proof-mnt ' /proc/self/mountinfo \
    || fail "the privileged pod's mount did not propagate to the node"
step "proof passed in $((SECONDS - started))s"

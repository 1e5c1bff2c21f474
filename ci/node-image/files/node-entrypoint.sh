#!/bin/bash
# PID 1's child of a node container (docker's init is PID 1): prepares the container the way
# kind's entrypoint does (as far as the capabilities granted allow), starts containerd,
# imports the node's images, then runs kubelet in one of two ways:
#
# - /etc/kubernetes/kubelet.flags present (written by whoever creates the node, e.g.
#   ci/node-image/prove-one-pod.sh, with `docker cp` before `docker start`): exec kubelet
#   with those flags.
# - otherwise, as kubeadm expects of systemd with its kubelet drop-in (the kind backend,
#   cluster::kind): kubelet is started once `kubeadm init` or `kubeadm join` has
#   written /var/lib/kubelet/config.yaml and a kubeconfig, with the flags of
#   /var/lib/kubelet/kubeadm-flags.env, and restarted whenever it exits (systemd's
#   Restart=always). There is no systemd here: kubeadm warns that it found no init system
#   and goes on; this loop plays its part.
#
# Environment:
#   SNAPSHOTTER   containerd snapshotter (default overlayfs; `native` as fallback)
#   POD_SUBNET    this node's pod CIDR for a bridge CNI config written at start (the proof
#                 sets it; unset, whoever bootstraps the node writes the CNI config later,
#                 as kind's CNI does once the node has its pod CIDR)
#   CGROUP_ROOT   kubelet's cgroup root; created in every v1 hierarchy (default /<hostname>)
#   SYSCTL_SHIM   1 (default): bind-mount the values kubelet insists on over the read-only
#                 /proc/sys files (see below); 0: leave /proc/sys alone
#   KUBELET_LOG   where kubelet's output goes in the kubeadm mode (default
#                 /var/log/node/kubelet.log)
#
# /run/node-entrypoint.ready appears once containerd runs with the images imported.
set -euo pipefail
log() { printf 'node-entrypoint: %s\n' "$*" >&2; }

: "${SNAPSHOTTER:=overlayfs}" "${POD_SUBNET:=}" "${SYSCTL_SHIM:=1}"
: "${KUBELET_LOG:=/var/log/node/kubelet.log}"
: "${CGROUP_ROOT:=/$(hostname)}"

# kubelet/cAdvisor read the machine id; debootstrap's minbase has none (kind writes one too).
[ -s /etc/machine-id ] || tr -d - </proc/sys/kernel/random/uuid >/etc/machine-id

# Mount propagation as kind does it: kubelet and the runtime need a shared root.
mount --make-rshared / || log "warning: mount --make-rshared / failed"

# kubelet (setupKernelTunables) requires vm.overcommit_memory=1, vm.panic_on_oom=0,
# kernel.panic=10, kernel.panic_on_oops=1, kernel.keys.root_maxkeys=1000000,
# kernel.keys.root_maxbytes=25000000 and fails to start when it can neither read them nor
# write them. Without --privileged /proc/sys is read-only (and these are host-wide knobs, so
# a node must not change them anyway): bind-mount files holding the wanted values over the
# ones that differ. Only this container's view changes.
if [ "$SYSCTL_SHIM" = 1 ]; then
    mkdir -p /run/sysctl-shim
    for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
        kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
        k=${kv%%=*} v=${kv#*=}
        [ "$(cat "/proc/sys/$k")" = "$v" ] && continue
        f=/run/sysctl-shim/${k//\//.}
        echo "$v" >"$f"
        mount --bind "$f" "/proc/sys/$k"
        log "sysctl shim: /proc/sys/$k reads $v here (host value unchanged)"
    done
fi

# cgroup v1 (the engine's cgroupfs hierarchy, bind-mounted rw from the host): kubelet wants
# its --cgroup-root to exist in every hierarchy.
for h in /sys/fs/cgroup/*/; do
    [ -e "$h/cgroup.procs" ] || continue
    case "$h" in */unified/) continue ;; esac
    mkdir -p "$h${CGROUP_ROOT#/}"
done

# Pod network of the proof: one bridge on this node, addresses from POD_SUBNET (no
# masquerade: the proof needs no traffic off the node).
mkdir -p /etc/cni/net.d
[ -z "$POD_SUBNET" ] || cat >/etc/cni/net.d/10-bridge.conflist <<CNI
{
  "cniVersion": "0.4.0",
  "name": "node-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_SUBNET"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
CNI

sed "s/@SNAPSHOTTER@/$SNAPSHOTTER/" /etc/containerd/config.toml.in >/etc/containerd/config.toml
mkdir -p /var/log/node
containerd --config /etc/containerd/config.toml >>/var/log/node/containerd.log 2>&1 &
for _ in $(seq 1 100); do
    ctr version >/dev/null 2>&1 && break
    sleep 0.2
done
ctr version >/dev/null || { log "containerd did not come up"; tail -n 30 /var/log/node/containerd.log >&2; exit 1; }
log "containerd up (snapshotter $SNAPSHOTTER)"

for img in /opt/node-images/*.tar; do
    ctr -n k8s.io images import --snapshotter "$SNAPSHOTTER" "$img" >&2
done
ctr -n k8s.io images ls -q >&2

touch /run/node-entrypoint.ready

if [ -f /etc/kubernetes/kubelet.flags ]; then
    mapfile -t flags < <(grep -v '^#' /etc/kubernetes/kubelet.flags | sed '/^$/d')
    log "exec kubelet ${flags[*]}"
    exec kubelet "${flags[@]}" --cgroup-root="$CGROUP_ROOT"
fi

# kubeadm mode: kubeadm's systemd drop-in (10-kubeadm.conf), played by a loop.
mkdir -p "$(dirname "$KUBELET_LOG")"
log "kubelet waits for kubeadm (log $KUBELET_LOG)"
while :; do
    if [ -f /var/lib/kubelet/config.yaml ] && [ -f /var/lib/kubelet/kubeadm-flags.env ] &&
        { [ -f /etc/kubernetes/kubelet.conf ] || [ -f /etc/kubernetes/bootstrap-kubelet.conf ]; }; then
        KUBELET_KUBEADM_ARGS=
        # shellcheck disable=SC1091
        . /var/lib/kubelet/kubeadm-flags.env
        # shellcheck disable=SC2086
        kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
            --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml \
            $KUBELET_KUBEADM_ARGS --cgroup-root="$CGROUP_ROOT" >>"$KUBELET_LOG" 2>&1 || true
        log "kubelet exited; starting it again in 1s"
    fi
    sleep 1
done

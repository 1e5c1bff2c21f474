#!/usr/bin/env bash
# The main job: the conformance run on the embedded default, with all set-up done here.
#
# Today it runs the CSI sanity suite against the Manila CSI driver + the NFS node plugin
# + the fake OpenStack cloud (all real processes over unix sockets), and proves the cloud
# holds no leftovers. The storage e2e suites on the embedded cluster join it as they land.
#
# Output: target/conformance/<run>/ (logs of every process, junit.xml, summary.txt).
# Extra arguments go to csi-sanity (e.g. --focus Node).
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

run_id=$(date -u +%Y%m%dT%H%M%SZ)
out="$PWD/target/conformance/$run_id"
mkdir -p "$out/mnt" "$out/staging"
bin="$PWD/target/debug"

step "building the driver, the NFS plugin, the fake cloud and the suites"
cargo build --locked -p fakes -p manila-csi-plugin -p nfs-csi-plugin -p suites

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# Waits until a file exists, showing what the process logged if it dies first.
wait_for_file() {
    local file=$1 pid=$2 log=$3 what=$4
    for _ in $(seq 1 300); do
        [ -e "$file" ] && return 0
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; fail "$what exited before it was ready (log: $log)"; }
        sleep 0.1
    done
    tail -n 20 "$log" >&2
    fail "$what not ready after 30 s: $file missing (log: $log)"
}

step "starting the fake OpenStack cloud"
target/debug/fake-openstack --port 0 --seed fixtures/fake-cloud/default.yaml \
    --write-secret "$out/cloud-secret.json" --write-clouds-yaml "$out/clouds.yaml" \
    >"$out/fake-openstack.log" 2>&1 &
pids+=($!)
wait_for_file "$out/cloud-secret.json" $! "$out/fake-openstack.log" fake-openstack
auth_url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["os-authURL"])' "$out/cloud-secret.json")
cloud="${auth_url%/identity/v3}"
step "fake cloud at $cloud"

step "starting the NFS node plugin (local mounter, private mount namespace)"
unshare --mount --propagation private -- "$bin/nfs-csi-plugin" --endpoint "unix://$out/nfs.sock" \
    --nodeid conformance-node --mounter local >"$out/nfs-csi-plugin.log" 2>&1 &
pids+=($!)
wait_for_file "$out/nfs.sock" $! "$out/nfs-csi-plugin.log" nfs-csi-plugin

step "starting the Manila CSI driver"
"$bin/manila-csi-plugin" --endpoint "unix://$out/manila.sock" --nodeid conformance-node \
    --share-protocol-selector NFS --fwdendpoint "unix://$out/nfs.sock" \
    >"$out/manila-csi-plugin.log" 2>&1 &
pids+=($!)
wait_for_file "$out/manila.sock" $! "$out/manila-csi-plugin.log" manila-csi-plugin

# csi-sanity's secrets file: the cloud's flat os-* secret for every RPC that takes one.
python3 - "$out/cloud-secret.json" >"$out/secrets.yaml" <<'PY'
import json, sys
secret = json.load(open(sys.argv[1]))
for rpc in ["CreateVolume", "DeleteVolume", "ControllerValidateVolumeCapabilities",
            "NodeStageVolume", "NodePublishVolume", "CreateSnapshot", "DeleteSnapshot",
            "ControllerExpandVolume"]:
    print(f"{rpc}Secret:")
    for key, value in secret.items():
        print(f"  {key}: {json.dumps(value)}")
PY
chmod 600 "$out/secrets.yaml" "$out/cloud-secret.json"

step "running the CSI sanity suite"
status=0
"$bin/csi-sanity" --csi.endpoint "unix://$out/manila.sock" --csi.secrets "$out/secrets.yaml" \
    --csi.mountdir "$out/mnt" --csi.stagingdir "$out/staging" --junit "$out/junit.xml" "$@" \
    | tee "$out/summary.txt" || status=$?

step "checking that the cloud holds no leftovers"
leftovers=$(curl -fsS "$cloud/_fake/leftovers")
echo "$leftovers" >"$out/leftovers.json"
if ! python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if not any(d.values()) else 1)' <<<"$leftovers"; then
    echo "leftovers in the fake cloud: $leftovers" >&2
    status=1
fi

step "report: $out (summary.txt, junit.xml, logs)"
exit "$status"

#!/usr/bin/env bash
# The project's test command: installs what the tests need (cached under
# ~/.cache/openstack-csi-conformance), checks formatting and lints, then runs every test
# with nextest. CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

step "toolchain: $(cargo --version)"
if ! cargo nextest --version >/dev/null 2>&1; then
    step "installing cargo-nextest"
    cargo install --locked cargo-nextest
fi

ci/install-openstack-clients.sh
ci/install-control-plane.sh
ci/install-host-tools.sh
# The containers backend's image (a Debian root filesystem, no registry; cached), and the
# kind backend's node image (kubelet, kubeadm, kube-proxy and the control-plane images from
# the same Kubernetes source; ≈ 10 min cold, then cached).
ci/node-image/build.sh container-node >/dev/null
ci/node-image/build.sh kind >/dev/null

step "cargo fmt --check"
cargo fmt --all -- --check
step "structure: no import circle, no file over 700 lines, mods at the top, no glob imports, no dependency on a driver crate"
python3 ci/check-structure.py
step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
step "cargo nextest run"
profile=default
[ "${CI:-}" = true ] && profile=ci
# The tests run with a temporary directory of their own (short: unix socket paths below
# it must stay under 107 bytes), which must be empty again afterwards: no test may leave
# files, mounts or processes behind.
run_tmp=$(mktemp -d /tmp/tXXXX)
status=0
TMPDIR=$run_tmp cargo nextest run --workspace --locked --profile "$profile" "$@" || status=$?
step "checking for leftovers of the test run"
if ! ci/check-leftovers.py "$run_tmp" && [ "$status" = 0 ]; then status=1; fi
exit "$status"

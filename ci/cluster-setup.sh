#!/usr/bin/env bash
# nextest setup script (see .config/nextest.toml): starts the embedded cluster the run's
# tests share and exports its run directory to them as HARNESS_CLUSTER_DIR. The cluster
# lives as long as the nextest process (this script's parent) and stops by itself when the
# run ends. Settings: HARNESS_CLUSTER_NODES (default 3), HARNESS_CLUSTER_ZONES (default
# zone-a,zone-b,zone-c).
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

: "${NEXTEST_ENV:?this script is meant to run as a nextest setup script}"
nextest_pid=$PPID

target_dir=$(cargo metadata --format-version 1 --no-deps |
    grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)
conformance="$target_dir/debug/conformance"
# nextest has built the cluster binaries when it runs their packages' tests; build them
# only when they are missing or older than their sources (e.g. a run of another package's
# tests). Building a few packages alone resolves features differently from a workspace
# build and would recompile much of the dependency tree, so it is skipped when not needed.
if [ ! -x "$conformance" ] || [ ! -x "$target_dir/debug/node-agent" ] ||
    [ ! -x "$target_dir/debug/pod-sandbox" ] ||
    [ -n "$(find harness/*/src harness/*/Cargo.toml suites/src suites/Cargo.toml Cargo.lock -newer "$conformance" -print -quit)" ]; then
    step "building the cluster binaries (conformance, node-agent, pod-sandbox)"
    cargo build --quiet -p node-agent -p pod-runtime -p suites --bins
fi
[ -x "$conformance" ] || fail "no $conformance after cargo build"

step "starting the shared cluster for nextest (pid $nextest_pid)"
"$conformance" cluster up \
    --nodes "${HARNESS_CLUSTER_NODES:-3}" \
    --zones "${HARNESS_CLUSTER_ZONES:-zone-a,zone-b,zone-c}" \
    --until-pid "$nextest_pid" \
    --env-file "$NEXTEST_ENV" >/dev/null

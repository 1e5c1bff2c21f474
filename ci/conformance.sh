#!/usr/bin/env bash
# The main job: `conformance run` on the embedded default, with all set-up done here.
#
# Builds the `conformance` binary and runs every suite (CSI sanity, provisioning,
# snapshottable, multiVolume, volume-expand, topology) against the Manila CSI driver deployed
# on one embedded cluster (real control plane, simulated nodes) with the fake OpenStack cloud.
# The first run also builds the driver, sidecar and node binaries and installs the control
# plane from Debian's packages (cached under ~/.cache/openstack-csi-conformance), with
# progress output.
#
# Output: target/conformance/<UTC time>/ (report.md, junit.xml, evidence of failures).
# Extra arguments go to `conformance run` (e.g. --suite multiVolume, --keep, --parallel 2;
# `target/debug/conformance run --help` lists them). Exit status: 0 passed, 1 a test failed,
# 2 bad input.
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

step "building the conformance command"
cargo build --locked -p suites --bin conformance
exec target/debug/conformance run "$@"

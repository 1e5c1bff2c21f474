#!/usr/bin/env bash
# Installs the official OpenStack command-line clients (python-openstackclient with the
# Manila plugin, python-manilaclient) from PyPI into a cached virtualenv. Idempotent: a
# complete virtualenv is reused. Prints the path of the `openstack` executable.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

venv="$CACHE_DIR/openstack-clients"
stamp="$venv/.complete"
# Pinned so that a test failure means the fake changed, not the client.
packages=(python-openstackclient==10.5.0 python-manilaclient==6.3.0)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${packages[*]}" ]; then
    step "openstack clients: cached in $venv"
else
    python3 -m venv --help >/dev/null 2>&1 || fail "python3 with the venv module is required"
    step "openstack clients: creating virtualenv $venv (${packages[*]})"
    rm -rf "$venv"
    mkdir -p "$CACHE_DIR"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}" \
        || fail "pip could not install ${packages[*]} into $venv"
    "$venv/bin/openstack" --version >/dev/null || fail "the installed openstack client does not start"
    echo "${packages[*]}" > "$stamp"
fi
echo "$venv/bin/openstack"

# Shared helpers for the ci/ scripts. Source it; do not run it.
# Everything big is cached under $CACHE_DIR so a second run reuses it.
: "${CACHE_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/openstack-csi-conformance}"
export CACHE_DIR

step() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

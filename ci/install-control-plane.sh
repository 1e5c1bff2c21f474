#!/usr/bin/env bash
# Obtains the Kubernetes control-plane binaries the embedded cluster runs: etcd (Debian
# bookworm `etcd-server`) and kube-apiserver, kube-controller-manager, kube-scheduler v1.20.2
# built from Debian bookworm's `kubernetes` source package with golang-1.15 from bullseye;
# kubectl of the same version too, so the tests need nothing from the host.
# The recipe and why each step is needed: ../shared/docs/control-plane.md (project docs).
#
# - Output: $CACHE_DIR/control-plane/v1.20.2/bin; the directory is printed on stdout at the end.
# - Idempotent: a complete install carries a stamp and is reused at once; a failed or
#   interrupted build never gets the stamp, so the next run rebuilds.
# - Debian's archive is read with a private source list, state and cache under $CACHE_DIR;
#   the system's apt configuration is never changed. Missing host build tools (rsync, make,
#   gcc, ...) are installed with the system's apt-get.
# - If $KUBEBUILDER_ASSETS names a directory holding the four binaries, nothing is done.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

k8s_version=v1.20.2
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler)
# Changing anything in the recipe below must change this key so old installs are rebuilt.
recipe="kubernetes-$k8s_version go-1.15/bullseye etcd-server/bookworm with-kubectl recipe-2"

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    missing=()
    for b in "${binaries[@]}"; do [ -x "$KUBEBUILDER_ASSETS/$b" ] || missing+=("$b"); done
    if [ ${#missing[@]} -eq 0 ]; then
        step "control plane: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
        echo "$KUBEBUILDER_ASSETS"
        exit 0
    fi
    step "control plane: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks ${missing[*]}; building into the cache instead"
fi

root="$CACHE_DIR/control-plane"
install_dir="$root/$k8s_version"
bin_dir="$install_dir/bin"
stamp="$install_dir/.complete"
work="$root/work"
logs="$work/logs"

is_complete() {
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$recipe" ] || return 1
    for b in "${binaries[@]}" kubectl; do [ -x "$bin_dir/$b" ] || return 1; done
}

if is_complete; then
    step "control plane: cached in $bin_dir"
    echo "$bin_dir"
    exit 0
fi

mkdir -p "$root"
# One build at a time (several test processes may ask for the binaries at once); whoever
# waited finds the stamp written by the one that built.
exec 9>"$root/.lock"
if ! flock -n 9; then
    step "control plane: another build is running; waiting for it ($root/.lock)"
    flock 9
fi
if is_complete; then
    step "control plane: cached in $bin_dir"
    echo "$bin_dir"
    exit 0
fi

rm -f "$stamp"
mkdir -p "$logs"
build_start=$SECONDS

# run_step ID DESCRIPTION COMMAND...: runs one step with its output in $logs/ID.log, whose
# tail is shown when it fails.
run_step() {
    local log="$logs/$1.log" name="$2"
    shift 2
    local start=$SECONDS
    step "control plane: $name"
    # A subshell with errexit of its own: in an `if` condition bash would ignore `set -e`.
    local rc=0
    set +e
    (
        set -e
        "$@"
    ) >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
        printf -- '--- last lines of %s ---\n' "$log" >&2
        tail -n 30 "$log" >&2
        fail "control plane: step '$name' failed after $((SECONDS - start))s (full log: $log)"
    fi
    step "control plane: $name done in $((SECONDS - start))s"
}

# --- host tools --------------------------------------------------------------------------
host_tools() {
    # command -> Debian package
    local -A need=([rsync]=rsync [make]=make [gcc]=gcc [flock]=util-linux [xz]=xz-utils
        [dpkg-deb]=dpkg [apt-get]=apt [tar]=tar [diff]=diffutils [find]=findutils)
    local missing=()
    for cmd in "${!need[@]}"; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
    done
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing missing host packages: ${missing[*]}"
        [ "$(id -u)" = 0 ] || { echo "not root: install ${missing[*]} yourself"; return 1; }
        DEBIAN_FRONTEND=noninteractive apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
    else
        echo "all host tools present"
    fi
}

# --- private apt -------------------------------------------------------------------------
apt_dir="$work/apt"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt_private() {
    apt-get \
        -o Dir::Etc::SourceList="$apt_dir/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::Etc::Preferences=/dev/null \
        -o Dir::Etc::PreferencesParts=/dev/null \
        -o Dir::State::Lists="$apt_dir/lists" \
        -o Dir::State::Status="$apt_dir/status" \
        -o Dir::Cache="$apt_dir/cache" \
        -o Dir::Cache::archives="$apt_dir/archives" \
        -o APT::Sandbox::User=root \
        "$@"
}

apt_update() {
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache" "$apt_dir/archives/partial"
    : >"$apt_dir/status"
    cat >"$apt_dir/sources.list" <<EOF
deb [signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb [signed-by=$keyring] http://deb.debian.org/debian bullseye main
EOF
    apt_private update
}

downloads="$work/downloads"
download_packages() {
    rm -rf "$downloads"
    mkdir -p "$downloads"
    cd "$downloads"
    apt_private download etcd-server/bookworm golang-1.15-go/bullseye golang-1.15-src/bullseye
    apt_private source --download-only kubernetes/bookworm
    ls -l
}

# --- unpack ------------------------------------------------------------------------------
go_root_parent="$work/go"
unpack_go_and_etcd() {
    rm -rf "$go_root_parent" "$work/etcd"
    mkdir -p "$go_root_parent" "$work/etcd"
    dpkg-deb -x "$downloads"/golang-1.15-go_*.deb "$go_root_parent"
    dpkg-deb -x "$downloads"/golang-1.15-src_*.deb "$go_root_parent"
    dpkg-deb -x "$downloads"/etcd-server_*.deb "$work/etcd"
    "$go_root_parent/usr/lib/go-1.15/bin/go" version
    "$work/etcd/usr/bin/etcd" --version
}

gopath="$work/gopath"
tree="$gopath/src/k8s.io/kubernetes"
unpack_kubernetes() {
    rm -rf "$gopath/src"
    mkdir -p "$tree"
    # The orig tarball is the upstream tree (with vendor/); Debian's own packaging is unused.
    local orig
    orig=$(find "$downloads" -maxdepth 1 -name 'kubernetes_*.orig.tar.*' | head -n 1)
    [ -n "$orig" ] || { echo "no kubernetes orig tarball in $downloads"; return 1; }
    tar -xf "$orig" -C "$tree" --strip-components=1
    [ -d "$tree/vendor" ] && [ -f "$tree/cmd/kube-apiserver/apiserver.go" ] \
        || { echo "unexpected layout of $orig"; return 1; }
}

# --- build -------------------------------------------------------------------------------
go_env() {
    export GOROOT="$go_root_parent/usr/lib/go-1.15"
    export PATH="$GOROOT/bin:$PATH"
    export GOPATH="$gopath"
    export GO111MODULE=off
    export GOFLAGS=
    export GOCACHE="$work/gocache"
    export GOTMPDIR="$work/tmp"
    mkdir -p "$GOTMPDIR"
}

generate() {
    go_env
    cd "$tree"
    # A failed earlier run can leave empty generator binaries behind; they must go.
    find _output/bin -maxdepth 1 -type f -empty -delete 2>/dev/null || true
    make generated_files
    [ -s pkg/generated/openapi/zz_generated.openapi.go ] \
        || { echo "make generated_files did not produce the OpenAPI definitions"; return 1; }
}

ldflags() {
    local flags="-s -w"
    for pkg in component-base/version client-go/pkg/version; do
        local p="k8s.io/kubernetes/vendor/k8s.io/$pkg"
        flags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=20"
        flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    echo "$flags"
}

build_one() {
    local name="$1"
    go_env
    cd "$tree"
    mkdir -p "$install_dir/bin.partial"
    CGO_ENABLED=0 go build -o "$install_dir/bin.partial/$name" -ldflags "$(ldflags)" "./cmd/$name"
    if [ "$name" = kubectl ]; then
        "$install_dir/bin.partial/$name" version --client --short
    else
        "$install_dir/bin.partial/$name" --version
    fi
}

finish() {
    cp "$work/etcd/usr/bin/etcd" "$install_dir/bin.partial/etcd"
    rm -rf "$bin_dir"
    mv "$install_dir/bin.partial" "$bin_dir"
    # sed reads all of the output: with `head -n 1`, a program still writing after head has
    # exited dies of SIGPIPE and pipefail fails the step (seen with etcd).
    for b in "${binaries[@]}"; do "$bin_dir/$b" --version | sed -n 1p; done
    "$bin_dir/kubectl" version --client --short
    # Written last: only a complete set of binaries gets a stamp.
    echo "$recipe" >"$stamp"
}

run_step host-tools "host build tools" host_tools
run_step apt-update "apt metadata (private lists in $apt_dir)" apt_update
run_step download "download etcd-server, golang-1.15, kubernetes source" download_packages
run_step unpack-go-etcd "unpack go and etcd" unpack_go_and_etcd
run_step unpack-kubernetes "unpack kubernetes source" unpack_kubernetes
run_step generate "generate code (make generated_files)" generate
rm -rf "$install_dir/bin.partial"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    run_step "build-$b" "build $b" build_one "$b"
done
run_step install "install into $bin_dir" finish
step "control plane: built in $((SECONDS - build_start))s"
echo "$bin_dir"

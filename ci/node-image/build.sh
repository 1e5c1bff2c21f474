#!/usr/bin/env bash
# Builds, without any registry, one of two images from the same cached Debian bookworm root
# filesystem:
#
#   build.sh [kind]         the node image of a kind-style cluster (below)
#   build.sh image REF OUT BINARY...
#                           an image archive OUT (docker-archive and OCI layout in one tarball,
#                           as `ctr images import` and `docker load` read) named REF holding
#                           the BINARY files in /usr/local/bin with the shared libraries they
#                           load (from this host); its command is the first BINARY. The kind
#                           backend imports such archives of the project's binaries into its
#                           nodes.
#   build.sh container-node the image of the containers backend's control-plane and node
#                           containers (cluster::containers): the root filesystem
#                           alone; the project's binaries and the control-plane binaries are
#                           bind-mounted at run time, so a code change needs no new image.
#                           Printed: openstack-csi-conformance/container-node:bookworm-<hash>
#
# The kind node image: a Debian bookworm root
# filesystem (debootstrap, minbase) with containerd, runc and the CNI plugins from Debian's
# packages, kubelet v1.20.2 built from the same Debian `kubernetes` source (and Go 1.15) as the
# embedded control plane, and two images imported into containerd at node start: a pause
# image built from build/pause of that source, and a busybox image from Debian's
# busybox-static. The root filesystem is `docker import`ed as
# openstack-csi-conformance/node:v1.20.2-<recipe hash>, whose name is printed on stdout.
#
# - Idempotent: an image with the current recipe hash is reused at once; the debootstrap
#   root filesystem, kubelet and the small images are cached under $CACHE_DIR/node-image.
# - Needs: docker, root (debootstrap), gcc with a static libc (pause), and the control-plane
#   work tree of ci/install-control-plane.sh ($CACHE_DIR/control-plane/work: Go 1.15 and the
#   unpacked Kubernetes source), which it runs first if the tree is missing.
# - Debian's archive is read with a private apt source list and state under the cache; the
#   system's apt configuration is never changed, debootstrap itself is unpacked from its .deb.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../lib.sh"

k8s_version=v1.20.2
pause_tag=3.4
pause_ref=localhost/openstack-csi-conformance/pause:$pause_tag
busybox_ref=localhost/openstack-csi-conformance/busybox:bookworm
packages=containerd,runc,containernetworking-plugins,iptables,iproute2,mount,util-linux,procps,kmod,ca-certificates,conntrack,socat,ethtool,e2fsprogs,xfsprogs
# Changing the debootstrap part must change this key (the cached root filesystem depends on it).
base_recipe="debootstrap bookworm minbase $packages base-2"
target=${1:-kind}
case "$target" in
    kind | container-node | image) ;;
    *) fail "unknown image $target: build.sh [kind|container-node|image REF OUT BINARY...]" ;;
esac

root="$CACHE_DIR/node-image"
cp_work="$CACHE_DIR/control-plane/work"
tree="$cp_work/gopath/src/k8s.io/kubernetes"
mkdir -p "$root/logs" "$root/bin" "$root/images" "$root/tmp"
exec 9>"$root/.lock"
flock 9

sha() { sha256sum "$@" | cut -d' ' -f1; }
base_hash=$(printf '%s' "$base_recipe" | sha | cut -c1-12)
base_tar="$root/rootfs-$base_hash.tar"

# --- private apt + debootstrap -------------------------------------------------------------
apt_dir="$root/apt"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt_private() {
    apt-get -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
        -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::Status="$apt_dir/status" \
        -o Dir::Cache="$apt_dir/cache" -o Dir::Cache::archives="$apt_dir/archives" \
        -o APT::Sandbox::User=root "$@"
}
debs="$root/debs"
fetch_debs() {
    [ -f "$debs/.complete" ] && return 0
    step "node image: apt metadata and debootstrap, busybox-static (.deb, private apt in $apt_dir)"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache" "$apt_dir/archives/partial"
    : >"$apt_dir/status"
    echo "deb [signed-by=$keyring] http://deb.debian.org/debian bookworm main" >"$apt_dir/sources.list"
    apt_private update >"$root/logs/apt-update.log" 2>&1
    rm -rf "$debs" && mkdir -p "$debs"
    (cd "$debs" && apt_private download debootstrap busybox-static) >"$root/logs/apt-download.log" 2>&1
    rm -rf "$root/tools" && mkdir -p "$root/tools"
    dpkg-deb -x "$debs"/debootstrap_*.deb "$root/tools/debootstrap"
    dpkg-deb -x "$debs"/busybox-static_*.deb "$root/tools/busybox"
    touch "$debs/.complete"
}

# --- base root filesystem ------------------------------------------------------------------
build_base() {
    [ -f "$base_tar" ] && return 0
    fetch_debs
    local start=$SECONDS dir="$root/tmp/rootfs"
    step "node image: debootstrap bookworm (minbase + $packages), log $root/logs/debootstrap.log"
    rm -rf "$dir" && mkdir -p "$dir" "$root/debootstrap-cache"
    DEBOOTSTRAP_DIR="$root/tools/debootstrap/usr/share/debootstrap" \
        nice -n 19 "$root/tools/debootstrap/usr/sbin/debootstrap" \
        --variant=minbase --include="$packages" --cache-dir="$root/debootstrap-cache" \
        --keyring="$keyring" bookworm "$dir" http://deb.debian.org/debian \
        >"$root/logs/debootstrap.log" 2>&1 \
        || { tail -n 20 "$root/logs/debootstrap.log" >&2; fail "debootstrap failed"; }
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" --numeric-owner -cf "$base_tar.partial" .
    mv "$base_tar.partial" "$base_tar"
    rm -rf "$dir"
    step "node image: base root filesystem in $((SECONDS - start))s ($(du -h "$base_tar" | cut -f1))"
}

# --- kubelet, kubeadm, kube-proxy and pause from the control plane's Kubernetes source ----
# build_k8s NAME: cmd/NAME built as the control plane's binaries are (Go 1.15, GOPATH mode,
# the same version ldflags), static (CGO_ENABLED=0), into $root/bin/NAME.
build_k8s() {
    local name="$1" out="$root/bin/$1" stamp="$root/bin/$1.recipe"
    local recipe="$name $k8s_version go-1.15 CGO_ENABLED=0"
    [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$recipe" ] && return 0
    if [ ! -f "$tree/cmd/kubelet/kubelet.go" ] || [ ! -x "$cp_work/go/usr/lib/go-1.15/bin/go" ]; then
        step "node image: no control-plane work tree; running ci/install-control-plane.sh"
        "$here/../install-control-plane.sh" >/dev/null
    fi
    [ -f "$tree/cmd/$name/$name.go" ] || [ -d "$tree/cmd/$name" ] || fail "no Kubernetes source \
in $tree (remove $CACHE_DIR/control-plane/$k8s_version/.complete so ci/install-control-plane.sh rebuilds it)"
    local start=$SECONDS flags="-s -w"
    for pkg in component-base/version client-go/pkg/version; do
        local p="k8s.io/kubernetes/vendor/k8s.io/$pkg"
        flags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=20"
        flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    step "node image: build $name (go 1.15, GOPATH mode, log $root/logs/$name.log)"
    (
        export GOROOT="$cp_work/go/usr/lib/go-1.15" GOPATH="$cp_work/gopath" GO111MODULE=off \
            GOFLAGS= GOCACHE="$cp_work/gocache" GOTMPDIR="$cp_work/tmp" CGO_ENABLED=0
        export PATH="$GOROOT/bin:$PATH"
        mkdir -p "$GOTMPDIR"
        cd "$tree"
        nice -n 19 go build -o "$out.partial" -ldflags "$flags" "./cmd/$name"
        "$out.partial" version 2>/dev/null || "$out.partial" --version
    ) >"$root/logs/$name.log" 2>&1 || { tail -n 20 "$root/logs/$name.log" >&2; fail "$name build failed"; }
    mv "$out.partial" "$out"
    echo "$recipe" >"$stamp"
    step "node image: $name built in $((SECONDS - start))s"
}

build_pause() {
    local out="$root/bin/pause"
    [ -x "$out" ] && return 0
    step "node image: build pause $pause_tag (static, from $tree/build/pause/linux/pause.c)"
    gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-debian-kubernetes-1.20.2" \
        -o "$out.partial" "$tree/build/pause/linux/pause.c"
    mv "$out.partial" "$out"
}

# image_tar REF ROOTFS_DIR CMD_JSON OUT: a one-layer image tarball, assembled by hand in both
# the OCI layout (index.json) and the docker-archive form (manifest.json), which
# `ctr images import` reads.
image_tar() {
    local ref="$1" src="$2" cmd="$3" out="$4" d
    d=$(mktemp -d "$root/tmp/img.XXXXXX")
    mkdir -p "$d/blobs/sha256"
    tar -C "$src" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$d/layer.tar" .
    local layer layer_size config config_size manifest manifest_size
    layer=$(sha "$d/layer.tar") layer_size=$(stat -c %s "$d/layer.tar")
    mv "$d/layer.tar" "$d/blobs/sha256/$layer"
    printf '{"architecture":"amd64","os":"linux","config":{"Cmd":%s,"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"ci/node-image/build.sh"}]}' \
        "$cmd" "$layer" >"$d/config.json"
    config=$(sha "$d/config.json") config_size=$(stat -c %s "$d/config.json")
    mv "$d/config.json" "$d/blobs/sha256/$config"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
        "$config" "$config_size" "$layer" "$layer_size" >"$d/manifest.oci.json"
    manifest=$(sha "$d/manifest.oci.json") manifest_size=$(stat -c %s "$d/manifest.oci.json")
    mv "$d/manifest.oci.json" "$d/blobs/sha256/$manifest"
    printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
        "$manifest" "$manifest_size" "$ref" "${ref##*:}" >"$d/index.json"
    echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
    printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":["blobs/sha256/%s"]}]' \
        "$config" "$ref" "$layer" >"$d/manifest.json"
    tar -C "$d" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out.partial" .
    mv "$out.partial" "$out"
    rm -rf "$d"
}

build_images() {
    local pause_out="$root/images/pause-$pause_tag.tar" bb_out="$root/images/busybox.tar"
    if [ ! -f "$pause_out" ]; then
        step "node image: pause image tarball ($pause_ref)"
        local d
        d=$(mktemp -d "$root/tmp/pause.XXXXXX")
        cp "$root/bin/pause" "$d/pause"
        image_tar "$pause_ref" "$d" '["/pause"]' "$pause_out"
        rm -rf "$d"
    fi
    if [ ! -f "$bb_out" ]; then
        fetch_debs
        step "node image: busybox image tarball ($busybox_ref, Debian busybox-static)"
        local d applet
        d=$(mktemp -d "$root/tmp/busybox.XXXXXX")
        mkdir -p "$d/bin" "$d/tmp" "$d/etc" "$d/proc" "$d/sys" "$d/dev"
        cp "$root/tools/busybox/bin/busybox" "$d/bin/busybox"
        for applet in $("$d/bin/busybox" --list); do
            [ "$applet" = busybox ] || ln -s busybox "$d/bin/$applet"
        done
        echo 'root:x:0:0:root:/root:/bin/sh' >"$d/etc/passwd"
        echo 'root:x:0:' >"$d/etc/group"
        image_tar "$busybox_ref" "$d" '["sh"]' "$bb_out"
        rm -rf "$d"
    fi
}

# --- the control plane's and kube-proxy's images (kind mode: kubeadm runs them as static pods
# and a DaemonSet) -----------------------------------------------------------------------------
# copy_in ROOT OUT PATH: PATH of the tree ROOT copied to OUT at the same place, following its
# symlinks (each link and what it points to are copied, as in the tree; directories are
# resolved, so merged /usr's /lib -> usr/lib lands in usr/lib).
copy_in() {
    local root out="$2" path="$3" n target dir
    root=$(cd "$1" && pwd -P)
    [ "$root" = / ] && root=
    for n in $(seq 16); do
        dir=$(cd "$root$(dirname "$path")" && pwd -P) || return 1
        dir=${dir#"$root"}
        path="${dir%/}/$(basename "$path")"
        mkdir -p "$out$dir"
        cp -a "$root$path" "$out$path"
        [ -L "$root$path" ] || return 0
        target=$(readlink "$root$path")
        case "$target" in /*) path="$target" ;; *) path="$dir/$target" ;; esac
    done
}
# libraries_of ROOT OUT FILE...: the shared libraries FILE (paths in ROOT) load, as ldd run in
# ROOT lists them, copied from ROOT to OUT; nothing for a static binary.
libraries_of() {
    local root="$1" out="$2" file lib
    shift 2
    for file in "$@"; do
        for lib in $(chroot "$root" ldd "$file" 2>/dev/null | grep -o '/[^ ]*' || true); do
            copy_in "$root" "$out" "$lib"
        done
    done
}
# merged_usr_tree DIR: the skeleton every image layer starts from.
merged_usr_tree() {
    mkdir -p "$1/usr/bin" "$1/usr/sbin" "$1/usr/lib" "$1/usr/lib64" "$1/usr/local/bin" "$1/etc" "$1/tmp" "$1/var/run"
    chmod 1777 "$1/tmp"
    ln -s usr/bin "$1/bin" && ln -s usr/sbin "$1/sbin" && ln -s usr/lib "$1/lib" && ln -s usr/lib64 "$1/lib64"
    echo 'root:x:0:0:root:/root:/bin/sh' >"$1/etc/passwd"
    echo 'root:x:0:' >"$1/etc/group"
    echo 'hosts: files dns' >"$1/etc/nsswitch.conf"
}
cp_bin="$CACHE_DIR/control-plane/$k8s_version/bin"
image_repository=localhost/openstack-csi-conformance
# build_cluster_images ROOTFS: kube-apiserver, kube-controller-manager, kube-scheduler and
# etcd from the control plane's binaries (the same ones the embedded cluster runs), and
# kube-proxy with Debian's iptables and conntrack from ROOTFS (the extracted base).
build_cluster_images() {
    local rootfs="$1" name d out
    [ -x "$cp_bin/etcd" ] || "$here/../install-control-plane.sh" >/dev/null
    for name in kube-apiserver kube-controller-manager kube-scheduler etcd kube-proxy; do
        out="$root/images/$name.tar"
        [ -f "$out" ] && [ "$(cat "$out.recipe" 2>/dev/null)" = "$cluster_images_recipe" ] && continue
        d=$(mktemp -d "$root/tmp/$name.XXXXXX")
        merged_usr_tree "$d"
        local tag=$k8s_version bin="$cp_bin/$name"
        [ "$name" = kube-proxy ] && bin="$root/bin/kube-proxy"
        install -m 0755 "$bin" "$d/usr/local/bin/$name"
        libraries_of / "$d" "$bin"
        case "$name" in
            kube-proxy)
                # kube-proxy's iptables mode runs iptables(-save,-restore) and conntrack.
                local f
                for f in iptables iptables-save iptables-restore ip6tables ip6tables-save \
                    ip6tables-restore iptables-nft iptables-legacy conntrack; do
                    [ -e "$rootfs/usr/sbin/$f" ] || continue
                    copy_in "$rootfs" "$d" "/usr/sbin/$f"
                    libraries_of "$rootfs" "$d" "/usr/sbin/$f"
                done
                for f in "$rootfs"/usr/lib/x86_64-linux-gnu/xtables/*.so; do
                    copy_in "$rootfs" "$d" "${f#"$rootfs"}"
                    libraries_of "$rootfs" "$d" "${f#"$rootfs"}"
                done
                ;;
            etcd)
                tag="$("$bin" --version | sed -n 's/^etcd Version: //p')-debian"
                ;;
        esac
        step "node image: $name image ($image_repository/$name:$tag)"
        image_tar "$image_repository/$name:$tag" "$d" "[\"/usr/local/bin/$name\"]" "$out"
        echo "$tag" >"$out.tag"
        echo "$cluster_images_recipe" >"$out.recipe"
        rm -rf "$d"
    done
}

if [ "$target" = image ]; then
    [ $# -ge 4 ] || fail "usage: build.sh image REF OUT BINARY..."
    ref="$2" out="$3"
    shift 3
    d=$(mktemp -d "$root/tmp/image.XXXXXX")
    merged_usr_tree "$d"
    for binary in "$@"; do
        [ -x "$binary" ] || fail "image $ref: $binary is not an executable file"
        install -m 0755 "$binary" "$d/usr/local/bin/$(basename "$binary")"
        libraries_of / "$d" "$(readlink -f "$binary")"
    done
    image_tar "$ref" "$d" "[\"/usr/local/bin/$(basename "$1")\"]" "$out"
    rm -rf "$d"
    step "image $ref: $out ($(du -h "$out" | cut -f1))"
    exit 0
fi

# --- the containers backend's image --------------------------------------------------------
# import_tree DIR IMAGE CHANGE...: `docker import` of DIR, then older tags of the repository go
# (docker refuses, harmlessly, those a container still uses).
import_tree() {
    local dir="$1" image="$2" old
    shift 2
    tar -C "$dir" --numeric-owner -cf - . | docker import "$@" - "$image" >/dev/null
    for old in $(docker image ls --format '{{.Repository}}:{{.Tag}}' "${image%%:*}"); do
        [ "$old" = "$image" ] || docker image rm "$old" >/dev/null 2>&1 || true
    done
}

if [ "$target" = container-node ]; then
    build_base
    image="openstack-csi-conformance/container-node:bookworm-$(
        { echo "$base_recipe"; sha "$here/build.sh"; } | sha | cut -c1-12
    )"
    if docker image inspect "$image" >/dev/null 2>&1; then
        step "container-node image: $image (cached)"
        echo "$image"
        exit 0
    fi
    start=$SECONDS
    step "container-node image: assembling $image"
    dir="$root/tmp/container-node-rootfs"
    rm -rf "$dir" && mkdir -p "$dir"
    tar -C "$dir" --numeric-owner -xf "$base_tar"
    echo "$image" >"$dir/etc/openstack-csi-conformance-node-image"
    import_tree "$dir" "$image" \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    rm -rf "$dir"
    step "container-node image: imported $image in $((SECONDS - start))s"
    echo "$image"
    exit 0
fi

# --- assemble and import -------------------------------------------------------------------
build_base
build_k8s kubelet
build_k8s kubeadm
build_k8s kube-proxy
build_pause
build_images
[ -x "$cp_bin/etcd" ] || "$here/../install-control-plane.sh" >/dev/null
cluster_images=(kube-apiserver kube-controller-manager kube-scheduler etcd kube-proxy)
cluster_images_recipe=$(
    sha "$here/build.sh" "$cp_bin/kube-apiserver" "$cp_bin/kube-controller-manager" \
        "$cp_bin/kube-scheduler" "$cp_bin/etcd" "$root/bin/kube-proxy" "$base_tar" | sha | cut -c1-12
)
for name in "${cluster_images[@]}"; do
    if [ "$(cat "$root/images/$name.tar.recipe" 2>/dev/null)" != "$cluster_images_recipe" ]; then
        dir="$root/tmp/cluster-images-rootfs"
        rm -rf "$dir" && mkdir -p "$dir"
        tar -C "$dir" --numeric-owner -xf "$base_tar"
        build_cluster_images "$dir"
        rm -rf "$dir"
        break
    fi
done

recipe_hash=$(
    {
        echo "$base_recipe $cluster_images_recipe"
        sha "$root/bin/kubelet" "$root/bin/kubeadm" "$root/images/pause-$pause_tag.tar" "$root/images/busybox.tar"
        sha "$here/build.sh" "$here/files/node-entrypoint.sh" "$here/files/containerd-config.toml"
    } | sha | cut -c1-12
)
image="openstack-csi-conformance/node:$k8s_version-$recipe_hash"
if docker image inspect "$image" >/dev/null 2>&1; then
    step "node image: $image (cached)"
    echo "$image"
    exit 0
fi

start=$SECONDS
step "node image: assembling $image"
dir="$root/tmp/node-rootfs"
rm -rf "$dir" && mkdir -p "$dir"
tar -C "$dir" --numeric-owner -xf "$base_tar"
install -m 0755 "$root/bin/kubelet" "$dir/usr/local/bin/kubelet"
install -m 0755 "$root/bin/kubeadm" "$dir/usr/local/bin/kubeadm"
install -m 0755 "$here/files/node-entrypoint.sh" "$dir/usr/local/bin/node-entrypoint"
mkdir -p "$dir/etc/containerd" "$dir/opt/node-images" "$dir/etc/kubernetes/manifests" \
    "$dir/var/lib/kubelet" "$dir/etc/cni/net.d" "$dir/kind"
install -m 0644 "$here/files/containerd-config.toml" "$dir/etc/containerd/config.toml.in"
cp "$root/images/pause-$pause_tag.tar" "$root/images/busybox.tar" "$dir/opt/node-images/"
for name in "${cluster_images[@]}"; do
    cp "$root/images/$name.tar" "$dir/opt/node-images/"
done
# What the kind backend (cluster::kind) reads to write kubeadm's configuration.
{
    echo "KUBERNETES_VERSION=$k8s_version"
    echo "IMAGE_REPOSITORY=$image_repository"
    echo "ETCD_IMAGE_TAG=$(cat "$root/images/etcd.tar.tag")"
    echo "SANDBOX_IMAGE=$pause_ref"
    echo "BUSYBOX_IMAGE=$busybox_ref"
} >"$dir/kind/images.env"
echo "$k8s_version" >"$dir/kind/version"
echo "$image" >"$dir/etc/openstack-csi-conformance-node-image"
import_tree "$dir" "$image" \
    --change 'ENTRYPOINT ["/usr/local/bin/node-entrypoint"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
rm -rf "$dir"
step "node image: imported $image in $((SECONDS - start))s"
echo "$image"

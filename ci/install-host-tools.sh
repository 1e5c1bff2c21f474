#!/usr/bin/env bash
# Installs the host tools the block-storage tests run that a minimal Debian may lack, with
# the system's apt-get (root only): the file-system tools the Cinder driver's node service
# uses on loop devices (mkfs.ext4/resize2fs/e2fsck/dumpe2fs from e2fsprogs, mkfs.xfs and
# xfs_growfs from xfsprogs, blkid/losetup/blockdev from util-linux and mount).
# Idempotent: does nothing when every tool is present.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# command -> Debian package
declare -A need=([mkfs.ext4]=e2fsprogs [resize2fs]=e2fsprogs [e2fsck]=e2fsprogs
    [dumpe2fs]=e2fsprogs [mkfs.xfs]=xfsprogs [xfs_growfs]=xfsprogs [blkid]=util-linux
    [losetup]=mount [blockdev]=util-linux)
missing=()
for cmd in "${!need[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
if [ ${#missing[@]} -eq 0 ]; then
    step "host tools: present (e2fsprogs, xfsprogs, util-linux)"
    exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
step "host tools: installing ${missing[*]}"
[ "$(id -u)" = 0 ] || fail "not root: install ${missing[*]} yourself"
DEBIAN_FRONTEND=noninteractive apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"

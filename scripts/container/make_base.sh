#!/usr/bin/env bash
# Build a minimal Debian 12 (bookworm) base image locally and import it as
# localhost/bookworm-min:local, for machines that reach the Debian archive
# (apt) but no container registry. debootstrap uses the archive apt is already
# configured with, so it works behind the same mirror or proxy as apt-get.
#
#   scripts/container/make_base.sh            # skip if the image exists
#   FORCE=1 scripts/container/make_base.sh    # rebuild it
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
podman_="$here/podman.sh"
image="${BASE_IMAGE:-localhost/bookworm-min:local}"
suite="${SUITE:-bookworm}"

if [[ -z "${FORCE:-}" ]] && "$podman_" image exists "$image"; then
    echo "==> base image $image already exists (FORCE=1 rebuilds it)"
    exit 0
fi

mirror_from_apt() {
    # deb822 sources (Debian 12's default) first, then one-line sources.list.
    local uri
    uri="$(grep -hs -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -v -e security -e updates | head -n1 || true)"
    if [[ -z "$uri" ]]; then
        uri="$(grep -hs -E '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' \
            | grep -v security | head -n1 || true)"
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}
mirror="${MIRROR:-$(mirror_from_apt)}"

for tool in debootstrap podman; do
    command -v "$tool" >/dev/null || {
        echo "voxclone: $tool is missing; install it with: apt-get install -y podman runc debootstrap" >&2
        exit 2
    }
done

root="$(mktemp -d /var/tmp/voxclone-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "==> debootstrap $suite from $mirror into $root (about a minute)"
debootstrap --variant=minbase "$suite" "$root" "$mirror"
# Same archive inside the image as on the host, so `apt-get` in the build
# stages reaches it too; no package lists shipped (the build refreshes them).
echo "deb $mirror $suite main" > "$root/etc/apt/sources.list"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
echo "==> importing as $image"
tar -C "$root" -c . | "$podman_" import - "$image"
"$podman_" image ls "$image"

#!/usr/bin/env bash
# Build one Debian root filesystem tarball offline from Debian's archive (no registry, no pull).
#
# Usage: sim/images/rootfs.sh PACKAGES_FILE OUT_TAR [OVERLAY_DIR] [CONFIGURE_SCRIPT]
#
#   debootstrap --variant=minbase --include=<PACKAGES_FILE> SUITE into a scratch folder beside
#   OUT_TAR, copy OVERLAY_DIR over it, run `CONFIGURE_SCRIPT ROOTFS`, drop documentation and apt
#   caches, and write `tar --numeric-owner` of it to OUT_TAR (atomically). The scratch folder is
#   removed afterwards. Downloaded .debs are kept in SIM_DEB_CACHE and reused.
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), DEBIAN_SUITE (bookworm),
# SIM_DEB_CACHE (default: <OUT_TAR's folder>/../debs). Needs root; installs debootstrap with
# apt-get when it is missing.
set -euo pipefail

packages_file=${1:?usage: $0 PACKAGES_FILE OUT_TAR [OVERLAY_DIR] [CONFIGURE_SCRIPT]}
out=${2:?usage: $0 PACKAGES_FILE OUT_TAR [OVERLAY_DIR] [CONFIGURE_SCRIPT]}
overlay=${3:-}
configure=${4:-}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}

say() { printf 'rootfs: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "debootstrap needs root"
if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || die "apt-get install debootstrap failed"
fi

packages=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$packages_file" | tr -s ' \n' ',' | sed 's/,$//')
[[ -n $packages ]] || die "$packages_file lists no packages"

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
debs=${SIM_DEB_CACHE:-$(dirname "$(dirname "$out")")/debs}
mkdir -p "$debs"
debs=$(cd "$debs" && pwd)
work=$out.rootfs
cleanup() { rm -rf "$work" "$out.tmp"; }
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"

say "debootstrap $suite minbase + $packages (mirror $mirror)"
start=$SECONDS
if ! debootstrap --variant=minbase --include="$packages" --cache-dir="$debs" \
    "$suite" "$work" "$mirror" >"$work.log" 2>&1; then
    tail -n 30 "$work.log" >&2
    [[ -f $work/debootstrap/debootstrap.log ]] && tail -n 30 "$work/debootstrap/debootstrap.log" >&2
    die "debootstrap failed (full log: $work.log)"
fi
say "debootstrap done in $((SECONDS - start))s"

if [[ -n $overlay ]]; then
    cp -a "$overlay/." "$work/"
fi
if [[ -n $configure ]]; then
    "$configure" "$work"
fi

# Smaller image, same behaviour: no docs, manuals, translations, apt lists or caches, logs.
rm -rf "$work"/usr/share/doc/* "$work"/usr/share/man/* "$work"/usr/share/info/* \
    "$work"/usr/share/locale/* "$work"/var/lib/apt/lists/* "$work"/var/cache/apt/*.bin \
    "$work"/var/cache/apt/archives/*.deb "$work"/var/log/*.log "$work"/var/log/apt/* \
    "$work"/debootstrap

tar --numeric-owner --xattrs -C "$work" -cf "$out.tmp" .
mv "$out.tmp" "$out"
rm -f "$work.log"
say "wrote $out ($(du -h "$out" | cut -f1))"

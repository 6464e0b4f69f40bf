#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What the arm64 kernel leg (tests/kernel) boots and runs, from Debian:
# qemu-system-arm and cpio installed on the host; Debian's arm64 kernel
# (the plain flavour: it has 9p as modules, the cloud one has none),
# busybox-static:arm64 and an arm64 python3 for the test drivers fetched
# with `apt-get download` and unpacked into a cache (never installed: an
# arm64 python3 would replace the host's). Package names are resolved at
# run time (the kernel's ABI name changes with every Debian point release).
# Quick when everything is there already.
#
#   scripts/fetch_arm64_kernel.sh [CACHE_DIR]   (default: .cache/arm64-kernel)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${1:-${FTJIT_KERNEL_CACHE:-$PWD/.cache/arm64-kernel}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
# Done before: nothing to ask apt (each query takes seconds on a loaded
# machine). FTJIT_KERNEL_REFRESH=1 resolves the names again.
if [ -e "$CACHE/.complete" ] && [ -z "${FTJIT_KERNEL_REFRESH:-}" ] && command -v qemu-system-aarch64 >/dev/null &&
   command -v cpio >/dev/null; then
  echo "== arm64 kernel leg: $(cat "$CACHE/.complete") in $CACHE"
  exit 0
fi
rm -f "$CACHE/.complete"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in qemu-system-arm cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
dpkg --print-foreign-architectures | grep -qx arm64 || {
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
}

# linux-image-arm64 depends on exactly one versioned kernel package.
kernel_pkg=$(apt-cache depends linux-image-arm64:arm64 | sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*\).*/\1/p' | head -1)
[ -n "$kernel_pkg" ] || { echo "fetch_arm64_kernel: apt-cache names no kernel for linux-image-arm64:arm64" >&2; exit 1; }
# python3.11-minimal's interpreter, its standard library, and the shared
# libraries of the modules the drivers import (the rest of libc and
# libstdc++ come from the cross toolchain and the :arm64 packages).
PYTHON_PKGS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib zlib1g libexpat1 libffi8)
want=("$kernel_pkg" busybox-static "${PYTHON_PKGS[@]}")

# A stamp per package, named by its exact version: a new kernel ABI or a
# point release fetches anew, an unchanged package is not downloaded again.
mkdir -p "$CACHE/debs" "$CACHE/unpacked"
for p in "${want[@]}"; do
  version=$(apt-cache policy "$p:arm64" | sed -n 's/^ *Candidate: //p')
  [ -n "$version" ] && [ "$version" != "(none)" ] || {
    echo "fetch_arm64_kernel: no candidate for $p:arm64 (apt-get update?)" >&2; exit 1; }
  stamp="$CACHE/unpacked/.$p=$version"
  [ -e "$stamp" ] && continue
  echo "== fetching $p:arm64 $version"
  rm -f "$CACHE/debs/${p}_"*.deb
  (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "$p:arm64=$version")
  case "$p" in
    linux-image-*)
      # The kernel and the modules 9p needs, in their load order (no
      # modules.dep inside: tests/kernel's init insmods them in this order).
      rm -rf "$CACHE/kernel" "$CACHE/unpacked/kernel"
      dpkg-deb -x "$CACHE/debs/${p}_"*.deb "$CACHE/unpacked/kernel"
      mkdir -p "$CACHE/kernel/modules"
      cp "$CACHE"/unpacked/kernel/boot/vmlinuz-* "$CACHE/kernel/vmlinuz"
      i=0
      for m in virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p; do
        ko=$(find "$CACHE/unpacked/kernel/lib/modules" -name "$m.ko" | head -1)
        [ -n "$ko" ] || { echo "fetch_arm64_kernel: $p has no $m.ko" >&2; exit 1; }
        cp "$ko" "$CACHE/kernel/modules/$i-$m.ko"
        i=$((i + 1))
      done
      rm -rf "$CACHE/unpacked/kernel"
      ;;
    busybox-static)
      rm -rf "$CACHE/unpacked/busybox"
      dpkg-deb -x "$CACHE/debs/${p}_"*.deb "$CACHE/unpacked/busybox"
      ;;
    *)
      mkdir -p "$CACHE/python"
      dpkg-deb -x "$CACHE/debs/${p}_"*.deb "$CACHE/python"
      ;;
  esac
  rm -f "$CACHE/unpacked/.$p="*
  touch "$stamp"
done
rm -f "$CACHE/debs/"*.deb
cp "$CACHE/unpacked/busybox/bin/busybox" "$CACHE/busybox"
# Byte code compiled once here (the host's python3 is 3.11 too; byte code
# is the same on every ISA): the VM mounts the cache read-only, and
# compiling the standard library at every start costs seconds under TCG.
python3 -m compileall -q -j2 "$CACHE/python/usr/lib/python3.11" >/dev/null || true
echo "$kernel_pkg, busybox-static and python3.11" > "$CACHE/.complete"
echo "== arm64 kernel leg: $(cat "$CACHE/.complete") in $CACHE"

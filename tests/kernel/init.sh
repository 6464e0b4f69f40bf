#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the kernel leg's initramfs (tests/kernel/kernel_leg.py builds
# it): mounts the host's directories over 9p at their host paths, points
# the dynamic loader at the cross toolchain's (the libc of the sysroot and
# its loader must be one build: cmake/toolchains/aarch64-linux-gnu.cmake),
# runs the plan, one verdict file per test, and powers off. The host
# trusts only the markers on the console (qemu exits 0 whatever happens).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
. /etc/leg.conf

halt() {
  echo "KERNEL-LEG: $*"
  sync
  poweroff -f
}

for m in /modules/*.ko; do
  insmod "$m" || halt "insmod $m failed"
done
while read -r tag path mode; do
  mkdir -p "$path" 2>/dev/null
  opts=trans=virtio,version=9p2000.L,msize=262144,$mode
  # Read-only trees cannot change under us: let the guest cache them.
  [ "$mode" = ro ] && opts=$opts,cache=loose
  mount -t 9p -o "$opts" "$tag" "$path" || halt "mount $tag on $path failed"
done < /etc/shares

echo "KERNEL-LEG: booted $(uname -r), $(grep -c ^processor /proc/cpuinfo) cpus"
# Quiet: the kernel's messages (a traced program's SIGILL, a 9p warning)
# would interleave with the markers.
echo 1 > /proc/sys/kernel/printk
# A program killed by a signal it did not handle: its pc and registers go
# to dmesg ($RESULTS/dmesg.log at the end).
echo 1 > /proc/sys/debug/exception-trace
cd /tmp
. "$PLAN"
# The kernel's side of any failure (a SIGILL, a segfault) for the logs.
dmesg > "$RESULTS/dmesg.log"
sync
halt "plan done"

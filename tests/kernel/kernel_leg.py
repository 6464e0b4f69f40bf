#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The arm64 kernel leg's host side (tests/kernel/CMakeLists.txt registers
it with ctest):

  kernel_leg.py boot --cache DIR --plan PLAN --results DIR --init INIT
                     --share PATH... [--timeout S]
      Builds an initramfs (busybox, the 9p modules, INIT, where to mount
      what), boots Debian's arm64 kernel once under qemu-system-aarch64
      with every PATH shared over 9p, read-only, and RESULTS read-write
      (each mounted in the VM at its host path, so that the absolute paths
      compiled into the test programs hold), and lets INIT run PLAN: one
      verdict file per test in RESULTS. Exits 0 only when the console shows
      the plan ran to its end; otherwise prints the console's tail.

  kernel_leg.py verdict --results DIR NAME
      Prints the log of the test NAME and exits 0 (pass), 1 (fail) or 77
      (skip, with its reason). No verdict (the kernel did not boot, the
      plan stopped): a failure, with the console's tail.
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time

BOOTED = "KERNEL-LEG: booted"
DONE = "KERNEL-LEG: plan done"
SKIP = 77


def console_tail(results, lines=40):
    path = os.path.join(results, "console.log")
    try:
        with open(path, errors="replace") as f:
            text = f.read().splitlines()
    except OSError:
        return "(no console log at %s: the boot test did not run)" % path
    return "\n".join(text[-lines:])


def build_initramfs(args, stage, out):
    """A gzip newc cpio of busybox, the modules and the init; built by cpio
    from a staging tree (no root needed: no device nodes in it)."""
    shutil.rmtree(stage, ignore_errors=True)
    for d in ("bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "lib", "modules", "usr/bin", "usr/sbin"):
        os.makedirs(os.path.join(stage, d))
    shutil.copy(os.path.join(args.cache, "busybox"), os.path.join(stage, "bin/busybox"))
    os.chmod(os.path.join(stage, "bin/busybox"), 0o755)
    modules = sorted(os.listdir(os.path.join(args.cache, "kernel/modules")),
                     key=lambda m: int(m.split("-", 1)[0]))
    for m in modules:
        shutil.copy(os.path.join(args.cache, "kernel/modules", m), os.path.join(stage, "modules", m))
    shutil.copy(args.init, os.path.join(stage, "init"))
    os.chmod(os.path.join(stage, "init"), 0o755)
    # Where to mount what: "tag path mode" lines, parents first.
    with open(os.path.join(stage, "etc/shares"), "w") as f:
        for i, (path, mode) in enumerate(shares(args)):
            f.write("host%d %s %s\n" % (i, path, mode))
    with open(os.path.join(stage, "etc/leg.conf"), "w") as f:
        f.write("PLAN=%s\nRESULTS=%s\n" % (args.plan, args.results))
    names = subprocess.run(["find", ".", "-mindepth", "1"], cwd=stage, check=True,
                           capture_output=True).stdout
    cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet", "--owner=0:0"], cwd=stage,
                          input=names, check=True, capture_output=True).stdout
    with gzip.open(out, "wb", compresslevel=1) as f:
        f.write(cpio)


def shares(args):
    """(path, ro|rw) to mount, parents before children."""
    out = [(os.path.realpath(p), "ro") for p in args.share]
    out.append((os.path.realpath(args.results), "rw"))
    seen, unique = set(), []
    for path, mode in out:
        if (path, mode) not in seen:
            seen.add((path, mode))
            unique.append((path, mode))
    return sorted(unique, key=lambda s: (s[0].count("/"), s[1] == "rw"))


def boot(args):
    started = time.monotonic()
    for what in ("busybox", "kernel/vmlinuz", "kernel/modules", "python/usr/bin/python3.11"):
        if not os.path.exists(os.path.join(args.cache, what)):
            print("kernel leg: %s missing in %s: run scripts/fetch_arm64_kernel.sh" %
                  (what, args.cache))
            return 1
    if shutil.which("qemu-system-aarch64") is None or shutil.which("cpio") is None:
        print("kernel leg: qemu-system-aarch64 or cpio missing: run scripts/fetch_arm64_kernel.sh")
        return 1
    # The verdicts of an earlier run must not pass for this one's.
    shutil.rmtree(args.results, ignore_errors=True)
    os.makedirs(args.results)
    # Beside the results, one per boot: two boots may run at once.
    work = os.path.realpath(args.results) + ".boot"
    os.makedirs(work, exist_ok=True)
    initrd = os.path.join(work, "initrd.gz")
    build_initramfs(args, os.path.join(work, "initramfs"), initrd)
    cmd = ["timeout", "-k", "5", str(args.timeout), "qemu-system-aarch64", "-M", "virt",
           "-accel", args.accel,
           "-cpu", "max,pauth-impdef=on", "-smp", "2", "-m", "1536", "-nographic", "-no-reboot",
           "-nic", "none", "-kernel", os.path.join(args.cache, "kernel/vmlinuz"), "-initrd", initrd,
           "-append", "console=ttyAMA0 rdinit=/init panic=-1 quiet"]
    for i, (path, mode) in enumerate(shares(args)):
        spec = "local,path=%s,mount_tag=host%d,security_model=none" % (path, i)
        if mode == "ro":
            spec += ",readonly=on"
        cmd += ["-virtfs", spec]
    console = os.path.join(args.results, "console.log")
    print("kernel leg: initramfs built in %.1f s; booting" % (time.monotonic() - started), flush=True)
    print(" ".join(cmd), flush=True)
    booted_at = time.monotonic()
    with open(console, "wb") as log:
        # The console goes to the log and, line by line, to our stdout
        # (ctest keeps it: where the time went).
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        for raw in p.stdout:
            log.write(raw)
            log.flush()
            line = raw.decode(errors="replace").rstrip("\r\n")
            if line.startswith("KERNEL-LEG"):
                print("[%6.1f s] %s" % (time.monotonic() - booted_at, line), flush=True)
        rc = p.wait()
    with open(console, errors="replace") as f:
        text = f.read()
    total = time.monotonic() - started
    if rc == 124 or rc == 137:
        print("kernel leg: qemu killed after %d s (timeout); the console's tail:\n%s" %
              (args.timeout, console_tail(args.results)))
        return 1
    if BOOTED not in text:
        print("kernel leg: the kernel did not boot (qemu exit %d); the console's tail:\n%s" %
              (rc, console_tail(args.results)))
        return 1
    if DONE not in text:
        print("kernel leg: the plan did not run to its end (qemu exit %d); the console's tail:\n%s" %
              (rc, console_tail(args.results)))
        return 1
    print("kernel leg: %.1f s in all" % total)
    return 0


def verdict(args):
    base = os.path.join(args.results, args.name)
    try:
        with open(base + ".verdict") as f:
            words = f.read().split(None, 1)
    except OSError:
        print("%s: no verdict: the kernel leg did not run it; the console's tail:\n%s" %
              (args.name, console_tail(args.results)))
        return 1
    try:
        with open(base + ".log", errors="replace") as f:
            sys.stdout.write(f.read())
    except OSError:
        print("(no log)")
    status = words[0] if words else ""
    detail = words[1].strip() if len(words) > 1 else ""
    print("kernel leg verdict: %s %s" % (status, detail))
    if status == "pass":
        return 0
    if status == "skip":
        return SKIP
    return 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("boot")
    b.add_argument("--cache", required=True)
    b.add_argument("--plan", required=True)
    b.add_argument("--results", required=True)
    b.add_argument("--init", required=True)
    b.add_argument("--share", action="append", default=[])
    b.add_argument("--timeout", type=int, default=600)
    b.add_argument("--accel", default="tcg",
                   help="QEMU's -accel: tcg (a thread per vCPU) or tcg,thread=single")
    v = sub.add_parser("verdict")
    v.add_argument("--results", required=True)
    v.add_argument("name")
    args = ap.parse_args()
    return boot(args) if args.command == "boot" else verdict(args)


if __name__ == "__main__":
    sys.exit(main())

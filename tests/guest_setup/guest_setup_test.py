#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# `ftjit run --plugin count` on programs of other ISAs with no
# FTJIT_AGENT_* variable set: ftjit finds each ISA's agent and plugins
# beside itself (../lib/ftjit/<isa>/), in the build tree and in an installed
# prefix. Exact counts: agent_target's "call 7" calls fn_alpha 7 times,
# fn_beta 14 and fn_gamma 21.
#
#   guest_setup_test.py CLI ISA=PROG...
#   guest_setup_test.py --install CMAKE BUILD_DIR PREFIX CLI ISA=PROG...
#       installs BUILD_DIR into PREFIX first and runs PREFIX/bin/ftjit
#       (CLI only names the build's, to check the install's is another file)
import os
import shutil
import subprocess
import sys
import tempfile

SCRIPT = b"call 7\nexit 0\n"
WANT = {"fn_alpha": 7, "fn_beta": 14, "fn_gamma": 21}
# What each ISA runs under, and its ELF machine number.
GUESTS = {"arm64": ("qemu-aarch64", "/usr/aarch64-linux-gnu", 183),
          "riscv64": ("qemu-riscv64", "/usr/riscv64-linux-gnu", 243)}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def clean_env():
    # Nothing that would point ftjit at an agent or plugin: it must find them itself.
    return {k: v for k, v in os.environ.items()
            if not k.startswith("FTJIT_AGENT") and k not in ("FTJIT_PLUGIN_PATH", "FTJIT_GENERATOR")}


def untraced(isa, prog):
    qemu, sysroot, _ = GUESTS[isa]
    r = subprocess.run([qemu, "-L", sysroot, "-E", "LD_LIBRARY_PATH=" + sysroot + "/lib", prog],
                       input=SCRIPT, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    return int.from_bytes(head[18:20], "little") if head[:4] == b"\x7fELF" else None


def run_count(cli, isa, prog, tmp):
    rep = os.path.join(tmp, isa + ".tsv")
    r = subprocess.run([cli, "run", "--plugin", "count", "--format", "tsv", "--filter", "fn_*", "-o", rep,
                        "--", prog], input=SCRIPT, capture_output=True, timeout=120, env=clean_env())
    label = "%s %s" % (os.path.relpath(cli), isa)
    check(r.returncode == 0, label + ": ftjit run succeeds: " + r.stderr.decode())
    check(r.stdout == untraced(isa, prog), label + ": output unchanged: %r" % r.stdout)
    if r.returncode == 0:
        with open(rep) as f:
            got = {name: int(calls) for name, calls in (line.rstrip("\n").split("\t") for line in f)}
        check(got == WANT, label + ": exact counts: %r" % got)


def check_installed(prefix, isa):
    # Files, not links into a build tree, of the ISA.
    for rel in ("libftjit-agent.so", "plugins/ftjit-plugin-count.so"):
        path = os.path.join(prefix, "lib", "ftjit", isa, rel)
        check(os.path.isfile(path) and not os.path.islink(path), "installed: " + path + " is a file")
        if os.path.isfile(path):
            check(elf_machine(path) == GUESTS[isa][2], path + " is an " + isa + " ELF")


def main():
    args = sys.argv[1:]
    install = args[0] == "--install"
    if install:
        cmake, build_dir, prefix = args[1:4]
        args = args[4:]
    cli, programs = args[0], [a.split("=", 1) for a in args[1:]]
    if install:
        shutil.rmtree(prefix, ignore_errors=True)
        r = subprocess.run([cmake, "--install", build_dir, "--prefix", prefix], capture_output=True, timeout=120)
        if r.returncode != 0:
            sys.exit("cmake --install failed: " + r.stderr.decode())
        installed = os.path.join(prefix, "bin", "ftjit")
        check(os.path.realpath(installed) != os.path.realpath(cli), "the installed ftjit is its own file")
        cli = installed
    # The reports in a directory of the build tree's test, removed after.
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as tmp:
        for isa, prog in programs:
            if install:
                check_installed(prefix, isa)
            run_count(cli, isa, prog, tmp)
    if install:
        shutil.rmtree(prefix, ignore_errors=True)
    print("%s: %s" % (" ".join(isa for isa, _ in programs), "FAILED" if failures else "ok"))
    sys.exit(1 if failures else 0)


main()

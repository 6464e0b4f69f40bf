#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`ftjit attach -p PID` on a process in a container: its own mount and PID
namespace (unshare --mount --pid --fork --mount-proc), its program and
library on a tmpfs mounted inside (the host cannot name them by path), its
own tmpfs on /tmp, and ftjit's build tree hidden under another tmpfs, so
that the agent and the plugins are not visible inside either. ftjit is
given the host's PID.

  container_e2e.py --ftjit FTJIT --app APP --lib LIB SCENARIO

Scenarios:
  attach        attach, exact counts from the count plugin with the
                functions named, detach; then the code bytes are the
                original ones (/proc/PID/mem), nothing of ftjit is mapped,
                and no file is left in the container (its tmpfs, its /tmp)
                or in the host's /tmp
  cli_killed    the CLI SIGKILLed while attached: `ftjit detach -p` ends the
                session with the same report and leaves the same nothing
  unprivileged  ftjit run as an unprivileged user against the container's
                root process: one line names the privilege and how to get it

Runs as root (unshare, mount, setpriv); without that it fails, saying why:
it never skips. Exits 0 (pass) or 1 (fail).
"""
import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The command-line helpers of the agent's end-to-end tests: running ftjit,
# checking its one-line errors, its reports and `ftjit status`.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
import agent_e2e as e2e  # noqa: E402
from agent_e2e import check, fatal, finish_ftjit, ftjit, log, parse_tsv, start_ftjit, \
    wait_attached  # noqa: E402

TIMEOUT = e2e.TIMEOUT
APP_DIR = "/mnt"  # inside the container only: a tmpfs mounted over it there

args = None


def call_counts(n):
    return {"app_work": n, "lib_square": 2 * n, "lib_mix": 3 * n}


# ------------------------------------------------------------ container ----

def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def staged_files_on_host():
    """Agent and plugin copies in the host's /tmp/ftjit-*/ (other tests may
    run meanwhile: only files of these names count)."""
    found = set()
    for d in os.listdir("/tmp"):
        if not d.startswith("ftjit-") or not os.path.isdir(os.path.join("/tmp", d)):
            continue
        try:
            for f in os.listdir(os.path.join("/tmp", d)):
                if f.endswith(".so") or ".so." in f:
                    found.add(os.path.join("/tmp", d, f))
        except OSError:
            pass
    return found


class Container:
    """container_app, driven over a pipe, as the second process of its own
    PID namespace (a shell is its init), in its own mount namespace."""

    def __init__(self):
        build_root = os.path.realpath(os.path.join(os.path.dirname(args.ftjit), ".."))
        lib_name = os.path.basename(args.lib)
        # The app runs as a child of the namespace's init shell (not exec'd:
        # its PID inside differs from 1, as in most containers).
        script = "\n".join([
            "set -e",
            "mount -t tmpfs -o mode=0755 ftjit-test-app %s" % APP_DIR,
            'cp "$1" %s/container_app' % APP_DIR,
            'cp "$2" %s/%s' % (APP_DIR, lib_name),
            'mount -t tmpfs -o mode=0755 ftjit-test-hide "$3"',
            "mount -t tmpfs -o mode=1777 ftjit-test-tmp /tmp",
            "set +e",
            "%s/container_app" % APP_DIR,
            "status=$?",
            "exit $status",
        ])
        argv = ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child",
                "sh", "-c", script, "sh", args.app, args.lib, build_root]
        self.lines = []
        self.buf = b""
        try:
            self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
        except OSError as e:
            fatal("cannot start unshare (util-linux): %s" % e)
        self.pid = 0
        line = self.read_line(what="ready")
        if line != "ready":
            fatal("container: printed %r, want 'ready'" % line)
        for init in children(self.p.pid):
            for c in children(init):
                if comm(c) == "container_app":
                    self.pid = c
        if not self.pid:
            fatal("container: no container_app under unshare %d" % self.p.pid)
        with open("/proc/%d/status" % self.pid) as f:
            nspid = re.search(r"^NSpid:\s+(.*)$", f.read(), re.M).group(1).split()
        log("container_app: PID %d on the host, %s inside" % (self.pid, nspid[-1]))
        if len(nspid) != 2 or nspid[0] == nspid[1]:
            fatal("container_app is not in a PID namespace of its own: NSpid %r" % nspid)
        if os.readlink("/proc/%d/ns/mnt" % self.pid) == os.readlink("/proc/self/ns/mnt"):
            fatal("container_app is in our mount namespace")
        if os.path.exists(APP_DIR + "/container_app"):
            fatal("%s/container_app is visible outside the container" % APP_DIR)
        self.root = "/proc/%d/root" % self.pid
        self.sent = []

    def read_line(self, what="a line"):
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                fatal("container: no %s within %d s (has %r)" % (what, TIMEOUT, self.buf))
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    err = self.p.stderr.read().decode(errors="replace")
                    fatal("container: ended (exit %s) before %s; its stderr: %r (the test "
                          "runs as root: unshare --mount --pid needs CAP_SYS_ADMIN)" %
                          (self.p.wait(), what, err))
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        line = line.decode()
        self.lines.append(line)
        return line

    def command(self, command, answer):
        self.sent.append(command)
        self.p.stdin.write((command + "\n").encode())
        self.p.stdin.flush()
        line = self.read_line(what=repr(answer))
        if not line.startswith(answer):
            fatal("container: printed %r, want %r..." % (line, answer))
        return line

    def code(self):
        """The bytes of every executable mapping of the app and its library."""
        ranges = []
        with open("/proc/%d/maps" % self.pid) as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and "x" in fields[1] and fields[5].startswith(APP_DIR + "/"):
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    ranges.append((lo, hi, fields[5].strip()))
        names = {r[2] for r in ranges}
        if len(names) != 2:
            fatal("container: executable mappings of %r, want the app and its library" % names)
        return e2e.read_ranges(self.pid, ranges)

    def check_code(self, before, what):
        now = self.code()
        check(set(now) == set(before), "%s: executable mappings changed: %r -> %r" %
              (what, sorted(before), sorted(now)))
        for k in before:
            if k in now and now[k] != before[k]:
                diff = [i for i in range(len(before[k])) if before[k][i] != now[k][i]]
                check(False, "%s: %d code bytes of %s differ from before the attach, first at 0x%x"
                      % (what, len(diff), k[2], k[0] + diff[0]))

    def files(self):
        """Every file in the container's /tmp and in its app tmpfs."""
        out = []
        for top in ("/tmp", APP_DIR):
            for d, dirs, names in os.walk(self.root + top):
                out += [os.path.join(d, n)[len(self.root):] for n in dirs + names]
        return sorted(out)

    def check_clean(self, what, staged_before):
        with open("/proc/%d/maps" % self.pid) as f:
            left = [l for l in f.read().splitlines() if "ftjit" in l.split(None, 5)[-1]]
        check(not left, "%s: ftjit mappings left: %r" % (what, left))
        want = sorted([APP_DIR + "/container_app", APP_DIR + "/" + os.path.basename(args.lib)])
        files = self.files()
        check(files == want, "%s: files in the container %r, want only %r" % (what, files, want))
        new = staged_files_on_host() - staged_before
        check(not new, "%s: files left in the host's /tmp: %r" % (what, sorted(new)))
        with open("/proc/%d/status" % self.pid) as f:
            status = f.read()
        check(re.search(r"^TracerPid:\s+0$", status, re.M) is not None, "%s: still traced" % what)
        state = re.search(r"^State:\s+(\S)", status, re.M).group(1)
        check(state in "RS", "%s: container_app in state %s" % (what, state))

    def finish(self, what):
        self.command("exit", "done")
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fatal("%s: the container did not end" % what)
        check(rc == 0, "%s: the container ended with %d" % (what, rc))
        # The same commands untraced, on the host: the same output.
        want = subprocess.run([args.app], input="".join(c + "\n" for c in self.sent),
                              capture_output=True, text=True, timeout=TIMEOUT).stdout
        got = "".join(l + "\n" for l in self.lines)
        check(got == want, "%s: the app printed %r, an untraced run %r" % (what, got, want))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()  # --kill-child: the namespace goes with it
            self.p.wait()


# ------------------------------------------------------------ scenarios ----

FILTERS = ("--filter", "app_work", "--filter", "lib_*")


def attach():
    staged_before = staged_files_on_host()
    c = Container()
    try:
        c.command("call 5", "called 5 ")
        before = c.code()
        a = start_ftjit("attach", "-p", str(c.pid), "--plugin", "count", "--format", "tsv",
                        *FILTERS)
        status = wait_attached(c.pid)
        # Resolved inside the container: the sites by module and function.
        enabled = sorted(tuple(l.split("\t")[4:6]) for l in status.splitlines()
                         if re.match(r"^0x[0-9a-f]+\t", l))
        lib = APP_DIR + "/" + os.path.basename(args.lib)
        want = sorted([(APP_DIR + "/container_app", "app_work"), (lib, "lib_mix"),
                       (lib, "lib_square")])
        check(enabled == want, "status: enabled sites %r, want %r" % (enabled, want))
        # The agent's copy is gone from the container once loaded: what
        # stays mapped is a deleted file.
        with open("/proc/%d/maps" % c.pid) as f:
            agent = [l.split(None, 5)[5].strip() for l in f if "libftjit-agent.so" in l]
        check(agent and all(p.endswith(" (deleted)") for p in agent),
              "attached: the agent is mapped from %r, want a deleted copy" % sorted(set(agent)))
        left = [f for f in c.files() if f.endswith(".so")]
        check(left == [APP_DIR + "/" + os.path.basename(args.lib)],
              "attached: libraries in the container %r, want only the app's" % left)
        c.command("call 100", "called 100 ")
        a.send_signal(signal.SIGINT)
        r = finish_ftjit(a)
        check(r.rc == 0, "attach: exit %s (stderr %r)" % (r.rc, r.err))
        counts = parse_tsv(r.out, "attach report")
        check(counts == call_counts(100), "attach: counts %r, want %r" % (counts, call_counts(100)))
        c.check_code(before, "after detach")
        c.check_clean("after detach", staged_before)
        c.command("call 7", "called 7 ")
        c.finish("attach")
    finally:
        c.kill()


def cli_killed():
    staged_before = staged_files_on_host()
    c = Container()
    try:
        before = c.code()
        a = start_ftjit("attach", "-p", str(c.pid), "--plugin", "count", "--format", "tsv",
                        *FILTERS)
        wait_attached(c.pid)
        a.kill()
        finish_ftjit(a)
        c.command("call 50", "called 50 ")  # still traced
        r = ftjit("detach", "-p", str(c.pid))
        check(r.rc == 0, "detach: exit %s (stderr %r)" % (r.rc, r.err))
        counts = parse_tsv(r.out, "detach report")
        check(counts == call_counts(50), "detach: counts %r, want %r" % (counts, call_counts(50)))
        c.check_code(before, "after detach")
        c.check_clean("after detach", staged_before)
        c.finish("cli_killed")
    finally:
        c.kill()


def unprivileged():
    staged_before = staged_files_on_host()
    c = Container()
    try:
        before = c.code()
        nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
        for argv in (("attach", "-p", str(c.pid), "--plugin", "count", "--duration", "0.2"),
                     ("detach", "-p", str(c.pid))):
            r = ftjit(*argv, prefix=nobody)
            check(r.rc != 0, "%s as nobody: exit 0, want an error" % argv[0])
            lines = r.err.splitlines()
            check(len(lines) == 1 and r.out == "",
                  "%s as nobody: want one line on stderr, got %r / %r" % (argv[0], r.out, r.err))
            check(re.search(r"^ftjit %s: .*process %d\b.*CAP_SYS_PTRACE.*\b(root|sudo)\b" %
                            (argv[0], c.pid), r.err) is not None,
                  "%s as nobody: %r does not name CAP_SYS_PTRACE and how to get it" %
                  (argv[0], r.err))
        c.check_code(before, "after the refused attach")
        c.check_clean("after the refused attach", staged_before)
        c.command("call 3", "called 3 ")
        c.finish("unprivileged")
    finally:
        c.kill()


SCENARIOS = {"attach": attach, "cli_killed": cli_killed, "unprivileged": unprivileged}


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--ftjit", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    args = e2e.args = ap.parse_args()
    if os.geteuid() != 0:
        log("FAIL: the container tests run as root (unshare --mount --pid, mount, setpriv); "
            "run them with sudo or in CI's root container")
        return 1
    e2e.tmpdir = tempfile.mkdtemp(prefix="container-e2e-")  # background ftjit's output
    started = time.monotonic()
    try:
        SCENARIOS[args.scenario]()
    except RuntimeError:
        pass
    finally:
        shutil.rmtree(e2e.tmpdir, ignore_errors=True)
    log("%s: %.1f s" % (args.scenario, time.monotonic() - started))
    if e2e.failures:
        log("%d failure(s):\n  %s" % (len(e2e.failures), "\n  ".join(e2e.failures)))
        return 1
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

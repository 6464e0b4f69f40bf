#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Live control under load: `ftjit control` pauses, resumes and refilters a
# session CHANGES times (1000 by default) over the control channel while
# live_target.c's threads call. Between two changes the target's four
# workers call lt_a and lt_b a number of times the test chose (a batch);
# two noise threads call lt_c all along, so that every change lands among
# calls and every filter change patches or unpatches sites being run.
# The session is a plain one (no --live): a pause unpatches the sites and
# a resume patches them again, count's inline counts kept throughout.
# count's final counts of lt_a and lt_b must be exactly the sum of the
# batches made while they were recorded; the target must finish with its
# output intact; attached with `ftjit attach`, the code of the target must
# be what it was before, byte for byte, once detached.
#
#   live_test.py CLI TARGET attach|run [ENV=VALUE...]
#
# run: `ftjit run` (a cross leg's program under qemu-user, where attach
# has no ptrace); the code check is then the agent tests' (tests/agent).
import os
import signal
import subprocess
import sys
import tempfile
import time

CLI, TARGET, MODE = sys.argv[1:4]
EXTRA_ENV = dict(a.split("=", 1) for a in sys.argv[4:])
# FTJIT_LIVE_CHANGES (here or among the ENV=VALUE pairs): fewer changes.
CHANGES = int(EXTRA_ENV.get("FTJIT_LIVE_CHANGES", os.environ.get("FTJIT_LIVE_CHANGES", "1000")))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)
    return cond


def env():
    e = dict(os.environ)
    e.update(EXTRA_ENV)
    return e


def text_of(pid):
    """The target's executable mappings, as (start, bytes)."""
    out = []
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb") as mem:
        for line in maps:
            w = line.split()
            if len(w) >= 6 and "x" in w[1] and os.path.realpath(w[5]) == os.path.realpath(TARGET):
                lo, hi = (int(x, 16) for x in w[0].split("-"))
                mem.seek(lo)
                out.append((lo, mem.read(hi - lo)))
    return out


class Target:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env(), text=True)

    def line(self):
        s = self.p.stdout.readline()
        if not s:
            raise RuntimeError("the target ended (exit %s)" % self.p.poll())
        return s.strip()

    def send(self, text):
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()


def control(pid, *args):
    r = subprocess.run([CLI, "control", "-p", str(pid), *args], capture_output=True, text=True, timeout=60,
                       env=env())
    check(r.returncode == 0, "ftjit control %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def child_of(pid):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        time.sleep(0.01)
    raise RuntimeError("ftjit run started no program")


# The changes, in turn: what each does to the state (paused, the filter).
FILTERS = {"lt_*": "abc", "lt_[ac]": "ac", "lt_b": "b", "lt_[bc]": "bc"}
STEPS = [("--pause",), ("--resume",), ("--filter", "lt_[ac]"), ("--filter", "lt_b"), ("--pause",),
         ("--filter", "lt_*"), ("--resume",), ("--filter", "lt_[bc]"), ("--filter", "lt_*")]


def main():
    with tempfile.TemporaryDirectory(prefix="ftjit-live-") as tmp:
        out = os.path.join(tmp, "count.tsv")
        plugin = "count:format=tsv,output=" + out
        if MODE == "attach":
            target = Target([TARGET])
            check(target.line() == "ready", "the target did not start")
            pid = target.p.pid
            before = text_of(pid)
            cli = subprocess.Popen([CLI, "attach", "-p", str(pid), "--plugin", plugin,
                                    "--filter", "lt_*"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env())
            deadline = time.monotonic() + 60
            while "attached: yes" not in subprocess.run([CLI, "status", "-p", str(pid), "--summary"],
                                                        capture_output=True, text=True).stdout:
                if cli.poll() is not None or time.monotonic() > deadline:
                    print(cli.communicate()[1])
                    raise RuntimeError("ftjit attach did not attach")
                time.sleep(0.05)
        else:
            target = Target([CLI, "run", "--plugin", plugin, "--filter", "lt_*", "--", TARGET])
            check(target.line() == "ready", "the target did not start")
            pid = child_of(target.p.pid)
            cli = None

        paused, selected = False, "abc"
        want = {"lt_a": 0, "lt_b": 0}
        start = time.monotonic()
        for i in range(CHANGES):
            step = STEPS[i % len(STEPS)]
            said = control(pid, *step)
            if step[0] == "--pause":
                paused = True
            elif step[0] == "--resume":
                paused = False
            else:
                selected = FILTERS[step[1]]
            check(("paused" if paused else "recording") in said, "change %d: the reply says %r" % (i, said))
            k = 1 + i % 7
            target.send("batch %d" % k)
            check(target.line() == "done %d" % k, "batch %d: no answer" % k)
            if not paused:
                if "a" in selected:
                    want["lt_a"] += 4 * k
                if "b" in selected:
                    want["lt_b"] += 4 * 2 * k
            if failures:
                break
        print("%d changes in %.1f s" % (CHANGES, time.monotonic() - start))
        status = subprocess.run([CLI, "status", "-p", str(pid), "--summary"], capture_output=True, text=True,
                                env=env()).stdout
        check("recording:" in status and "live" in status, "ftjit status does not show the recording:\n" + status)

        if cli is not None:
            cli.send_signal(signal.SIGINT)
            _, err = cli.communicate(timeout=120)
            check(cli.returncode == 0, "ftjit attach ended with %d: %s" % (cli.returncode, err.strip()))
            after = text_of(pid)
            check(after == before, "the target's code differs after the detach")
        target.send("quit")
        rest = target.p.communicate(timeout=120)[0]
        check(target.p.returncode == 0, "the target ended with %d" % target.p.returncode)
        noise = [int(l.split()[1]) for l in rest.splitlines() if l.startswith("noise ")]
        check(noise and noise[0] > 0, "the noise threads made no call")

        got = {}
        for line in open(out):
            name, calls = line.rstrip("\n").split("\t")
            got[name] = int(calls)
        check(got.get("lt_a", 0) == want["lt_a"] and got.get("lt_b", 0) == want["lt_b"],
              "counts %s, want %s" % ({k: got.get(k, 0) for k in want}, want))
        check(got.get("lt_c", 0) > 0, "lt_c never counted")
        print("ok: %s exact after %d changes (lt_c %d of %d noise calls)" % (
            want, CHANGES, got.get("lt_c", 0), noise[0] if noise else 0))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

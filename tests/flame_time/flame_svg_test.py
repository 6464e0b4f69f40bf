#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`flame --format svg` on flame_time_fixture.cpp, read as XML and loaded in a real browser.

usage: flame_svg_test.py FTJIT FIXTURE BROWSER

The picture, as XML: one frame per function per stack ("all" at the bottom), each as wide as
its share of the whole (data-w over all's), callees side by side within their caller, every
title naming the frame with its time, own time and calls; leaf_a's own 60 ms make it wider
than mid's 50 ms.

In the browser (Chromium headless, --dump-dom after the page's load): a probe script appended
to a copy of the SVG hovers a frame, clicks it and searches, then writes what it saw into the
document, which --dump-dom prints. It must see no script error; the hover's details line is
the frame's title; after the click on mid, mid spans the whole width, leaf_b (all of mid's
time below it) keeps its share of mid, work and main (its callers) stay full width and
leaf_a and thrower are hidden; a search for ^leaf_ turns leaf_a and leaf_b magenta and
matches their share of the whole (100 ms of about 131).
"""
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from fixture_oracle import FUNCS

NS = {"s": "http://www.w3.org/2000/svg"}
INNER = 1180.0  # px: the width between the margins

PROBE = r"""<script type="text/ecmascript"><![CDATA[
var probeErrors = [];
window.addEventListener("error", function (e) { probeErrors.push(String(e.message)); });
window.addEventListener("load", function () { setTimeout(function () {
  var out = {};
  try {
    var byName = {};
    document.querySelectorAll("g.f").forEach(function (g) { byName[g.getAttribute("data-n")] = g; });
    var mid = byName["mid"];
    mid.dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
    out.details = document.getElementById("details").textContent;
    out.title = mid.querySelector("title").textContent;
    mid.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    out.after_click = {};
    Object.keys(byName).forEach(function (n) {
      var g = byName[n];
      out.after_click[n] = [g.style.display, Number(g.querySelector("rect").getAttribute("width"))];
    });
    search(new RegExp("^leaf_"));
    out.matched = document.getElementById("matched").textContent;
    out.magenta = Object.keys(byName).filter(function (n) {
      return byName[n].querySelector("rect").getAttribute("fill") === "rgb(230,0,230)";
    }).sort();
  } catch (e) { out.error = String(e); }
  out.errors = probeErrors;
  document.documentElement.setAttribute("data-probe", JSON.stringify(out));
}, 0); });
]]></script>
</svg>"""

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def main():
    ftjit, fixture, browser = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="ftjit-flame-svg-") as work:
        svg_path = os.path.join(work, "flame.svg")
        args = [ftjit, "run", "--plugin", "flame", "--format", "svg", "-o", svg_path]
        for f in FUNCS:
            args += ["--filter", f]
        r = subprocess.run(args + ["--", fixture], capture_output=True, timeout=100)
        if r.returncode != 0:
            print("FAIL: ftjit run: " + r.stderr.decode()[-800:])
            return 1
        svg = open(svg_path).read()

        # The picture as XML.
        root = ET.fromstring(svg)
        frames = {}
        for g in root.findall("s:g", NS):
            rect = g.find("s:rect", NS)
            frames[g.get("data-n")] = {
                "w": int(g.get("data-w")), "x": int(g.get("data-x")), "d": int(g.get("data-d")),
                "px": float(rect.get("width")), "title": g.find("s:title", NS).text,
            }
        check(sorted(frames) == sorted(FUNCS + ["all"]), "frames: %s" % sorted(frames))
        if "all" in frames:
            total = frames["all"]["w"]
            for name, f in frames.items():
                check(abs(f["px"] - INNER * f["w"] / total) < 0.02,
                      "%s: %.2f px for %d of %d" % (name, f["px"], f["w"], total))
                check(f["title"].startswith(name + " ("), "%s: title %r" % (name, f["title"]))
            depth = {"all": 0, "main": 1, "work": 2, "leaf_a": 3, "mid": 3, "thrower": 3, "leaf_b": 4,
                     "deep_throw": 4}
            for name, d in depth.items():
                check(frames.get(name, {}).get("d") == d, "%s: depth %s, wanted %d" % (name, frames.get(name), d))
            # Callees lie within their caller, side by side.
            for child, parent in (("leaf_b", "mid"), ("deep_throw", "thrower"), ("mid", "work")):
                c, p = frames.get(child), frames.get(parent)
                if c and p:
                    check(p["x"] <= c["x"] and c["x"] + c["w"] <= p["x"] + p["w"],
                          "%s within %s: %s %s" % (child, parent, c, p))
            check(frames["leaf_a"]["w"] > frames["mid"]["w"], "leaf_a (60 ms) wider than mid (50 ms)")
            check(re.search(r"; 2 calls\)$", frames["leaf_a"]["title"]) is not None,
                  "leaf_a's title: %r" % frames["leaf_a"]["title"])

        # The picture in a browser.
        probe_path = os.path.join(work, "probe.svg")
        with open(probe_path, "w") as f:
            f.write(svg.replace("</svg>\n", PROBE))
        r = subprocess.run([browser, "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                            "--dump-dom", "file://" + probe_path],
                           capture_output=True, timeout=90, cwd=work,
                           env=dict(os.environ, HOME=work))
        m = re.search(r'data-probe="([^"]*)"', r.stdout.decode())
        if m is None:
            print("FAIL: the browser printed no probe (exit %d): %s" % (r.returncode, r.stderr.decode()[-1500:]))
            return 1
        probe = json.loads(html.unescape(m.group(1)))
    check("error" not in probe and not probe.get("errors"), "script errors: %s" % probe)
    check(probe.get("details") == probe.get("title"), "hover: %r vs title %r" % (probe.get("details"), probe.get("title")))
    after = probe.get("after_click", {})
    for name in ("mid", "work", "main", "all"):
        shown, px = after.get(name, ["?", 0])
        check(shown == "" and abs(px - INNER) < 0.02, "after the click, %s: %s %.2f px" % (name, shown, px))
    if "mid" in frames and "leaf_b" in frames:
        want = INNER * frames["leaf_b"]["w"] / frames["mid"]["w"]
        shown, px = after.get("leaf_b", ["?", 0])
        check(shown == "" and abs(px - want) < 0.02, "after the click, leaf_b: %s %.2f px, wanted %.2f" % (shown, px, want))
    for name in ("leaf_a", "thrower", "deep_throw"):
        check(after.get(name, [""])[0] == "none", "after the click, %s shown: %s" % (name, after.get(name)))
    check(probe.get("magenta") == ["leaf_a", "leaf_b"], "search ^leaf_: %s" % probe.get("magenta"))
    if "all" in frames:
        share = 100.0 * (frames["leaf_a"]["w"] + frames["leaf_b"]["w"]) / frames["all"]["w"]
        check(probe.get("matched") == "Matched: %.2f%%" % share, "matched: %r, wanted %.2f%%" % (probe.get("matched"), share))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        print("probe: %s" % probe)
        return 1
    print("ok: %d frames; in the browser: hover, zoom on mid, search ^leaf_ (%s)" % (len(frames), probe.get("matched")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

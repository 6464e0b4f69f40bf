// SPDX-License-Identifier: MIT
// flame plugin: the SVG report (flame_svg.h). The picture is laid out
// here; the small script at its end only rescales what is there.
//
//   +--------------------------------------------------------------+
//   | title                                     Search  Reset Zoom |
//   |            [c     ]                                          |  depth 3
//   |     [b            ][d       ]                                |  depth 2
//   | [a                              ][e              ]           |  depth 1
//   | [all                                                       ] |  depth 0
//   | details of the frame under the pointer                       |
//   +--------------------------------------------------------------+
//
// Each frame is a <g class="f"> holding its <title> (what a hover shows,
// also without the script), a <rect> and a <text>, with its place in
// weight units (data-x, data-w), its depth (data-d) and its name (data-n)
// for the script.
#include "flame_svg.h"

#include <cinttypes>
#include <memory>
#include <string_view>
#include <vector>

namespace ftjit_flame {

namespace {

constexpr double kWidth = 1200;      // px
constexpr double kMargin = 10;       // px, left and right
constexpr double kFrameHeight = 16;  // px, one depth
constexpr double kTop = 44;          // px above the deepest frame
constexpr double kBottom = 34;       // px below "all"
constexpr double kMinWidth = 0.1;    // px: narrower frames are left out
constexpr double kCharWidth = 7;     // px of a 12px monospace-ish label

struct TreeNode {
  std::string name;
  uint64_t own = 0;    // the weight of this exact stack
  uint64_t calls = 0;  // calls of this exact stack
  uint64_t width = 0;  // own + the children's widths
  std::map<std::string, std::unique_ptr<TreeNode>> children;
};

void add_stack(TreeNode &root, std::string_view stack, uint64_t weight, uint64_t calls) {
  TreeNode *node = &root;
  size_t begin = 0;
  for (;;) {
    const size_t end = stack.find(';', begin);
    const std::string name(stack.substr(begin, end == std::string_view::npos ? end : end - begin));
    auto &child = node->children[name];
    if (!child) {
      child = std::make_unique<TreeNode>();
      child->name = name;
    }
    node = child.get();
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  node->own += weight;
  node->calls += calls;
}

uint64_t sum_widths(TreeNode &node, uint32_t depth, uint32_t *max_depth) {
  if (depth > *max_depth) *max_depth = depth;
  node.width = node.own;
  for (auto &[name, child] : node.children) node.width += sum_widths(*child, depth + 1, max_depth);
  return node.width;
}

std::string xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control bytes are not allowed in XML 1.0.
        out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return out;
}

// flamegraph.pl's warm palette, from the name: the same name has the same
// colour in every picture, so that two runs can be compared by eye.
std::string colour(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  const unsigned r = 205 + static_cast<unsigned>(h % 50);
  const unsigned g = static_cast<unsigned>((h >> 8) % 230);
  const unsigned b = static_cast<unsigned>((h >> 16) % 55);
  char buf[24];
  std::snprintf(buf, sizeof buf, "rgb(%u,%u,%u)", r, g, b);
  return buf;
}

// "1.234 ms" (by time) or "42 calls".
std::string amount(uint64_t weight, bool by_time) {
  char buf[48];
  if (!by_time) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " calls", weight);
  } else if (weight >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(weight) / 1e9);
  } else if (weight >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(weight) / 1e6);
  } else if (weight >= 1'000) {
    std::snprintf(buf, sizeof buf, "%.3f us", static_cast<double>(weight) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " ns", weight);
  }
  return buf;
}

std::string label(std::string_view name, double px) {
  const size_t fits = static_cast<size_t>(px / kCharWidth);
  if (fits < 3) return {};
  if (name.size() <= fits) return std::string(name);
  return std::string(name.substr(0, fits - 2)) + "..";
}

struct Layout {
  FILE *out;
  bool by_time;
  uint64_t total;
  double height;
};

void write_frame(const Layout &l, const TreeNode &node, uint64_t x, uint32_t depth) {
  const double scale = (kWidth - 2 * kMargin) / static_cast<double>(l.total);
  const double px = static_cast<double>(node.width) * scale;
  if (px < kMinWidth) return;  // and so are all its callees
  const double left = kMargin + static_cast<double>(x) * scale;
  const double y = l.height - kBottom - (depth + 1) * kFrameHeight;
  const double share = 100.0 * static_cast<double>(node.width) / static_cast<double>(l.total);
  std::string title = node.name + " (" + amount(node.width, l.by_time);
  char pct[32];
  std::snprintf(pct, sizeof pct, ", %.2f%%", share);
  title += pct;
  if (l.by_time && depth > 0) {
    title += "; self " + amount(node.own, true) + "; " + std::to_string(node.calls) + " calls";
  }
  title += ")";
  const std::string name = xml(node.name);
  std::fprintf(l.out,
               "<g class=\"f\" data-x=\"%" PRIu64 "\" data-w=\"%" PRIu64 "\" data-d=\"%u\" data-n=\"%s\">"
               "<title>%s</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" "
               "rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">%s</text></g>\n",
               x, node.width, depth, name.c_str(), xml(title).c_str(), left, y, px, kFrameHeight - 1,
               colour(node.name).c_str(), left + 3, y + kFrameHeight - 4.5, xml(label(node.name, px)).c_str());
  uint64_t child_x = x;
  for (const auto &[key, child] : node.children) {
    write_frame(l, *child, child_x, depth + 1);
    child_x += child->width;
  }
}

// Zoom: the clicked frame fills the width, its ancestors stay full width,
// the rest is hidden. Search: frames whose name matches a regex turn
// magenta, and the share of the whole they cover is shown.
constexpr const char *kScript = R"JS(
"use strict";
var frames = [], zoomed = null;
var W = %WIDTH%, M = %MARGIN%, CW = %CHARW%;
function num(g, k) { return Number(g.getAttribute("data-" + k)); }
function fit(name, px) {
  var n = Math.floor(px / CW);
  if (n < 3) return "";
  return name.length <= n ? name : name.substring(0, n - 2) + "..";
}
function place(g, x0, w0) {
  var x = num(g, "x"), w = num(g, "w"), d = num(g, "d");
  var r = g.querySelector("rect"), t = g.querySelector("text");
  var inside = x >= x0 && x + w <= x0 + w0 && d >= zoomed.d;
  var above = d < zoomed.d && x <= x0 && x + w >= x0 + w0;
  if (!inside && !above) { g.style.display = "none"; return; }
  g.style.display = "";
  var left = above ? M : M + (x - x0) * (W - 2 * M) / w0;
  var px = above ? W - 2 * M : w * (W - 2 * M) / w0;
  r.setAttribute("x", left.toFixed(2));
  r.setAttribute("width", px.toFixed(2));
  r.style.opacity = above ? "0.5" : "";
  t.setAttribute("x", (left + 3).toFixed(2));
  t.textContent = fit(g.getAttribute("data-n"), px);
}
function zoom(g) {
  zoomed = { x: num(g, "x"), w: num(g, "w"), d: num(g, "d") };
  frames.forEach(function (f) { place(f, zoomed.x, zoomed.w); });
  document.getElementById("reset").style.opacity = zoomed.d > 0 ? "1" : "0.3";
}
function search(re) {
  var spans = [], all = num(frames[0], "w");
  frames.forEach(function (f) {
    var hit = re !== null && re.test(f.getAttribute("data-n"));
    var r = f.querySelector("rect");
    if (!r.hasAttribute("data-fill")) r.setAttribute("data-fill", r.getAttribute("fill"));
    r.setAttribute("fill", hit ? "rgb(230,0,230)" : r.getAttribute("data-fill"));
    if (hit) spans.push([num(f, "x"), num(f, "x") + num(f, "w")]);
  });
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var covered = 0, end = -1;
  spans.forEach(function (s) {
    if (s[1] <= end) return;
    covered += s[1] - Math.max(s[0], end);
    end = s[1];
  });
  document.getElementById("matched").textContent =
      re === null ? "" : "Matched: " + (100 * covered / all).toFixed(2) + "%";
}
function init() {
  frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  frames.forEach(function (f) {
    f.addEventListener("click", function () { zoom(f); });
    f.addEventListener("mouseover", function () {
      document.getElementById("details").textContent = f.querySelector("title").textContent;
    });
    f.addEventListener("mouseout", function () { document.getElementById("details").textContent = " "; });
  });
  document.getElementById("reset").addEventListener("click", function () { zoom(frames[0]); });
  document.getElementById("search").addEventListener("click", function () {
    var text = window.prompt("Search for (a regular expression):", "");
    if (text === null || text === "") { search(null); return; }
    try { search(new RegExp(text)); } catch (e) { window.alert("Not a regular expression: " + e.message); }
  });
  if (frames.length > 0) zoom(frames[0]);
}
window.addEventListener("load", init);
)JS";

void replace_all(std::string &s, std::string_view what, const std::string &with) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size()))
    s.replace(at, what.size(), with);
}

}  // namespace

void write_svg(FILE *out, const std::map<std::string, Weights> &stacks, bool by_time) {
  TreeNode root;
  root.name = "all";
  for (const auto &[stack, w] : stacks) {
    const uint64_t weight = by_time ? w.self_ns : w.calls;
    if (by_time && w.total_ns == 0) continue;  // as the folded output
    add_stack(root, stack, weight, w.calls);
  }
  uint32_t max_depth = 0;
  sum_widths(root, 0, &max_depth);
  const double height = kTop + (max_depth + 1) * kFrameHeight + kBottom;
  std::fprintf(out,
               "<?xml version=\"1.0\" standalone=\"no\"?>\n"
               "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n"
               "<style>text { font-family: monospace; font-size: 12px; fill: #000; } "
               "g.f:hover rect { stroke: #000; stroke-width: 0.5; } g.f { cursor: pointer; } "
               "#title { font-size: 17px; } .ctl { cursor: pointer; fill: #225; }</style>\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f4\"/>\n"
               "<text id=\"title\" x=\"%.0f\" y=\"24\" text-anchor=\"middle\">%s</text>\n"
               "<text id=\"search\" class=\"ctl\" x=\"%.0f\" y=\"24\" text-anchor=\"end\">Search</text>\n"
               "<text id=\"reset\" class=\"ctl\" x=\"%.0f\" y=\"24\">Reset Zoom</text>\n"
               "<text id=\"matched\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\"> </text>\n"
               "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n",
               kWidth, height, kWidth, height, kWidth / 2,
               by_time ? "Flame graph: time (each frame as wide as its calls' whole time)"
                       : "Flame graph: calls",
               kWidth - kMargin, kMargin, kWidth - kMargin, height - 12, kMargin, height - 12);
  if (root.width != 0) {
    const Layout layout{out, by_time, root.width, height};
    write_frame(layout, root, 0, 0);
  }
  std::string script = kScript;
  replace_all(script, "%WIDTH%", std::to_string(static_cast<int>(kWidth)));
  replace_all(script, "%MARGIN%", std::to_string(static_cast<int>(kMargin)));
  replace_all(script, "%CHARW%", std::to_string(static_cast<int>(kCharWidth)));
  // CDATA keeps the script's '<' and '&' out of the XML parser's way.
  std::fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[%s]]></script>\n</svg>\n", script.c_str());
}

}  // namespace ftjit_flame

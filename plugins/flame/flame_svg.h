// SPDX-License-Identifier: MIT
// flame plugin: the report as one self-contained interactive SVG, in the
// manner of flamegraph.pl: a frame per function per stack, as wide as its
// weight, callers below callees; hovering shows its name, time and calls,
// a click zooms to it, "Search" highlights the frames a regex matches.
#ifndef FTJIT_PLUGIN_FLAME_SVG_H
#define FTJIT_PLUGIN_FLAME_SVG_H

#include <cstdio>
#include <map>
#include <string>

#include "flame.h"

namespace ftjit_flame {

//! `stacks`: folded stack ("a;b;c") -> its weights. By time, a frame is as
//! wide as its calls' whole time (the self times of its stack and of every
//! longer one); by calls, as its calls and its callees'.
void write_svg(FILE *out, const std::map<std::string, Weights> &stacks,
               bool by_time);

}  // namespace ftjit_flame

#endif

// SPDX-License-Identifier: MIT
// flame plugin: the report in speedscope's file format
// (https://www.speedscope.app/file-format-schema.json): one "sampled"
// profile whose samples are the folded stacks and whose weights are their
// own time in ns (or their calls), which speedscope, and Perfetto's and
// Firefox Profiler's importers, open.
#ifndef FTJIT_PLUGIN_FLAME_SPEEDSCOPE_H
#define FTJIT_PLUGIN_FLAME_SPEEDSCOPE_H

#include <cstdio>
#include <map>
#include <string>

#include "flame.h"

namespace ftjit_flame {

void write_speedscope(FILE *out, const std::map<std::string, Weights> &stacks,
                      bool by_time, const char *process_name);

}  // namespace ftjit_flame

#endif

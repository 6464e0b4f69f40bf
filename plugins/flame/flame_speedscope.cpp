// SPDX-License-Identifier: MIT
// flame plugin: speedscope's file format (flame_speedscope.h).
//
//   {"$schema": ".../file-format-schema.json", "exporter": "ftjit",
//    "shared": {"frames": [{"name": "main"}, {"name": "work"}, ...]},
//    "profiles": [{"type": "sampled", "unit": "nanoseconds" | "none",
//                  "startValue": 0, "endValue": <sum of weights>,
//                  "samples": [[0], [0, 1], ...],   frame indices, outermost first
//                  "weights": [13871, 5155000, ...]}]}
#include "flame_speedscope.h"

#include <cinttypes>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plugin_support.h"

namespace ftjit_flame {

void write_speedscope(FILE *out, const std::map<std::string, Weights> &stacks,
                      bool by_time, const char *process_name) {
  namespace support = ftjit_plugin_support;
  std::unordered_map<std::string, size_t> index;
  std::vector<std::string_view> names;
  std::vector<std::vector<size_t>> samples;
  std::vector<uint64_t> weights;
  uint64_t sum = 0;
  for (const auto &[stack, w] : stacks) {
    // As the folded output: by time, stacks of no time are left out.
    if (by_time && w.total_ns == 0) continue;
    std::vector<size_t> sample;
    size_t begin = 0;
    for (;;) {
      const size_t end = stack.find(';', begin);
      std::string name = stack.substr(begin, end == std::string::npos ? end : end - begin);
      auto [it, fresh] = index.try_emplace(std::move(name), names.size());
      if (fresh) names.push_back(it->first);
      sample.push_back(it->second);
      if (end == std::string::npos) break;
      begin = end + 1;
    }
    samples.push_back(std::move(sample));
    const uint64_t weight = by_time ? w.self_ns : w.calls;
    weights.push_back(weight);
    sum += weight;
  }
  std::fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
             "\"exporter\":\"ftjit\",\"name\":",
             out);
  const std::string name = std::string("ftjit flame: ") + (process_name != nullptr ? process_name : "") +
                           (by_time ? " (time)" : " (calls)");
  support::write_json_string(out, name);
  std::fputs(",\"activeProfileIndex\":0,\"shared\":{\"frames\":[", out);
  for (size_t i = 0; i < names.size(); ++i) {
    std::fputs(i == 0 ? "{\"name\":" : ",{\"name\":", out);
    support::write_json_string(out, names[i]);
    std::fputc('}', out);
  }
  std::fputs("]},\"profiles\":[{\"type\":\"sampled\",\"name\":", out);
  support::write_json_string(out, name);
  std::fprintf(out, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRIu64 ",\"samples\":[",
               by_time ? "nanoseconds" : "none", sum);
  for (size_t i = 0; i < samples.size(); ++i) {
    std::fputs(i == 0 ? "[" : ",[", out);
    for (size_t k = 0; k < samples[i].size(); ++k)
      std::fprintf(out, k == 0 ? "%zu" : ",%zu", samples[i][k]);
    std::fputc(']', out);
  }
  std::fputs("],\"weights\":[", out);
  for (size_t i = 0; i < weights.size(); ++i) std::fprintf(out, i == 0 ? "%" PRIu64 : ",%" PRIu64, weights[i]);
  std::fputs("]}]}\n", out);
}

}  // namespace ftjit_flame

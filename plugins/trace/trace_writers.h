// SPDX-License-Identifier: MIT
// trace plugin: the output formats, each a Writer fed one event at a time on
// the host's writer thread, so that no format holds the trace in memory.
#ifndef FTJIT_PLUGIN_TRACE_WRITERS_H
#define FTJIT_PLUGIN_TRACE_WRITERS_H

#include "trace.h"

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plugin_support.h"

namespace ftjit_trace {

//! Function names, resolved once per ip on the writer thread.
class NameCache {
 public:
  explicit NameCache(ftjit_plugin_ctx *ctx) : ctx_(ctx) {}
  //! The host's (demangled) name, or 0x<ip> if it has none.
  const std::string &name(uint64_t ip);

 private:
  ftjit_plugin_ctx *ctx_;
  std::unordered_map<uint64_t, std::string> names_;
};

//! One captured value, copied out of the host's visit.
struct ArgValue {
  std::string name;  // "" for a return value
  uint32_t type = FTJIT_ARG_TEXT;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string text;
};

//! Records of arguments and return values (the bytes after an event),
//! read through the host on the writer thread.
class ArgReader {
 public:
  explicit ArgReader(ftjit_plugin_ctx *ctx) : ctx_(ctx) {}
  //! "fd=3, n=4096" (entry) or "4096" (return).
  std::string text(uint64_t ip, const void *record) const;
  std::vector<ArgValue> values(uint64_t ip, const void *record) const;

 private:
  ftjit_plugin_ctx *ctx_;
};

//! The traced process, as a viewer labels it.
struct ProcessInfo {
  int32_t pid = 0;
  std::string name;
};

class Writer {
 public:
  virtual ~Writer() = default;
  //! At init: whatever precedes the first event.
  virtual void start(FILE *out) = 0;
  //! One event of `thread`, in order per thread, with the record of its
  //! arguments or return value (NULL: none), valid for this call only.
  virtual void write(FILE *out, const ftjit_thread_info &thread,
                     const TraceEvent &event, const void *record) = 0;
  //! `n` consecutive events of `thread`, `stride` bytes apart (each a
  //! TraceEvent, its record after it if it has one). The same as write()
  //! for each; a format may encode them at once.
  virtual void write_run(FILE *out, const ftjit_thread_info &thread,
                         const uint8_t *events, size_t n, size_t stride) {
    for (size_t i = 0; i < n; ++i) {
      const auto *e = reinterpret_cast<const TraceEvent *>(events + i * stride);
      write(out, thread, *e, e->has_record != 0 ? e + 1 : nullptr);
    }
  }
  //! At report: whatever makes the file complete.
  virtual void finish(FILE *out, uint64_t dropped_events) = 0;
};

//! Function-graph text (ftrace function_graph / uftrace replay).
std::unique_ptr<Writer> make_text_writer(NameCache &names, const ArgReader &args);
//! Chrome trace-event JSON (B/E events, thread_name metadata).
std::unique_ptr<Writer> make_chrome_writer(NameCache &names,
                                           const ProcessInfo &process,
                                           const ArgReader &args);
//! Perfetto protobuf: TrackDescriptors, then interned TrackEvent slices.
std::unique_ptr<Writer> make_perfetto_writer(NameCache &names,
                                             const ProcessInfo &process,
                                             const ArgReader &args);

//! `text` as a JSON string literal, quotes included.
using ftjit_plugin_support::json_quote;

}  // namespace ftjit_trace

#endif

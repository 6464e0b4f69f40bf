// SPDX-License-Identifier: MIT
// trace plugin, text format: a function graph like ftrace's function_graph
// tracer and uftrace replay. A call whose exit is the thread's next event
// prints as one line `name();`, which needs one event of look-ahead per
// thread; every other call opens `name() {` and closes `} /* name */`.
#include "trace_writers.h"

#include <algorithm>
#include <cinttypes>
#include <vector>

namespace ftjit_trace {
namespace {

struct OpenFrame {
  uint64_t ip;
  uint64_t start_ns;
  uint32_t depth;
};

struct ThreadState {
  std::vector<OpenFrame> open;  // this thread's unclosed entries, by depth
  bool has_pending = false;     // an entry not printed yet (maybe a leaf)
  TraceEvent pending{};
  std::string pending_args;     // its arguments, shown (the record is gone)
};

class TextWriter final : public Writer {
 public:
  TextWriter(NameCache &names, const ArgReader &args) : names_(names), args_(args) {}

  void start(FILE *out) override {
    std::fprintf(out,
                 "# ftjit trace: CLOCK_MONOTONIC seconds; duration on exits\n"
                 "#%19s %9s   %12s   %s\n",
                 "TIMESTAMP", "TID", "DURATION", "FUNCTION");
  }

  void write(FILE *out, const ftjit_thread_info &thread,
             const TraceEvent &event, const void *record) override {
    auto [it, first] = threads_.try_emplace(thread.tid);
    if (first)
      std::fprintf(out, "# thread %" PRId32 ": %s\n", thread.tid,
                   thread.name != nullptr ? thread.name : "?");
    ThreadState &state = it->second;
    if (event.kind == EventKind::kEntry) {
      flush_pending(out, thread.tid, state);
      state.pending = event;
      state.pending_args = args_.text(event.ip, record);
      state.has_pending = true;
      return;
    }
    // uftrace's form: `name(args) = value;`, `} = value; /* name */`.
    const std::string returned =
        record != nullptr ? " = " + args_.text(event.ip, record) : std::string();
    const std::string &name = names_.name(event.ip);
    const char *unwound = event.kind == EventKind::kUnwound ? " /* unwound */"
                                                             : "";
    if (state.has_pending && state.pending.ip == event.ip &&
        state.pending.depth == event.depth) {
      state.has_pending = false;
      line(out, state.pending.timestamp_ns, thread.tid,
           event.timestamp_ns - state.pending.timestamp_ns, event.depth);
      std::fprintf(out, "%s%s;%s\n", call_text(name, state.pending_args).c_str(),
                   returned.c_str(), unwound);
      return;
    }
    flush_pending(out, thread.tid, state);
    const uint64_t duration = close_frame(state, event);
    line(out, event.timestamp_ns, thread.tid, duration, event.depth);
    std::fprintf(out, "}%s%s /* %s */%s\n", returned.c_str(),
                 returned.empty() ? "" : ";", name.c_str(), unwound);
  }

  void finish(FILE *out, uint64_t dropped_events) override {
    // By tid, so that the tail of a trace does not depend on hashing.
    std::vector<int32_t> tids;
    for (const auto &entry : threads_) tids.push_back(entry.first);
    std::sort(tids.begin(), tids.end());
    for (int32_t tid : tids) flush_pending(out, tid, threads_[tid]);
    std::fprintf(out, "# %" PRIu64 " events dropped (thread buffer full)\n",
                 dropped_events);
  }

 private:
  static constexpr uint64_t kUnknownDuration = ~uint64_t(0);

  void flush_pending(FILE *out, int32_t tid, ThreadState &state) {
    if (!state.has_pending) return;
    state.has_pending = false;
    const TraceEvent &entry = state.pending;
    state.open.push_back({entry.ip, entry.timestamp_ns, entry.depth});
    line(out, entry.timestamp_ns, tid, kUnknownDuration, entry.depth);
    std::fprintf(out, "%s {\n",
                 call_text(names_.name(entry.ip), state.pending_args).c_str());
  }

  // Dropped events can leave frames open that never close: an exit closes
  // every frame at its depth or deeper, and has a duration only if the frame
  // at its depth is its own entry.
  uint64_t close_frame(ThreadState &state, const TraceEvent &exit) {
    uint64_t duration = kUnknownDuration;
    while (!state.open.empty() && state.open.back().depth >= exit.depth) {
      const OpenFrame &frame = state.open.back();
      if (frame.depth == exit.depth && frame.ip == exit.ip)
        duration = exit.timestamp_ns - frame.start_ns;
      state.open.pop_back();
    }
    return duration;
  }

  // Demangled C++ names carry their parameter list already: captured
  // values take its place ("Counter::add(int)" becomes
  // "Counter::add(this=0x..., delta=2)"), qualifiers after it kept.
  static std::string call_text(const std::string &name, const std::string &args) {
    const size_t close = name.rfind(')');
    if (close == std::string::npos) return name + "(" + args + ")";
    if (args.empty()) return name;
    // The '(' that matches the last ')': the parameter list's.
    int depth = 0;
    for (size_t i = close + 1; i-- > 0;) {
      if (name[i] == ')') ++depth;
      if (name[i] == '(' && --depth == 0)
        return name.substr(0, i) + "(" + args + ")" + name.substr(close + 1);
    }
    return name + "(" + args + ")";
  }

  static void line(FILE *out, uint64_t timestamp_ns, int32_t tid,
                   uint64_t duration_ns, uint32_t depth) {
    std::fprintf(out, "%10" PRIu64 ".%09" PRIu64 " [%7" PRId32 "] | ",
                 timestamp_ns / 1000000000u, timestamp_ns % 1000000000u, tid);
    if (duration_ns == kUnknownDuration)
      std::fprintf(out, "%12s", "");
    else if (duration_ns < 1000000u)
      std::fprintf(out, "%9.3f us", double(duration_ns) / 1e3);
    else if (duration_ns < 1000000000u)
      std::fprintf(out, "%9.3f ms", double(duration_ns) / 1e6);
    else
      std::fprintf(out, "%9.3f  s", double(duration_ns) / 1e9);
    std::fprintf(out, " | %*s", int(depth * 2), "");
  }

  NameCache &names_;
  const ArgReader &args_;
  std::unordered_map<int32_t, ThreadState> threads_;
};

}  // namespace

std::unique_ptr<Writer> make_text_writer(NameCache &names, const ArgReader &args) {
  return std::make_unique<TextWriter>(names, args);
}

}  // namespace ftjit_trace

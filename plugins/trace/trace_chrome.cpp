// SPDX-License-Identifier: MIT
// trace plugin, chrome format: the Trace Event Format's JSON object form,
// which Perfetto UI and chrome://tracing open. Events are written as they
// come; the array is closed at report, so the file is valid JSON only then.
#include "trace_writers.h"

#include <cinttypes>
#include <unordered_set>

namespace ftjit_trace {

namespace {

class ChromeWriter final : public Writer {
 public:
  ChromeWriter(NameCache &names, const ProcessInfo &process, const ArgReader &args)
      : names_(names), process_(process), args_(args) {}

  void start(FILE *out) override {
    std::fprintf(out,
                 "{\"traceEvents\":[\n"
                 "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId32
                 ",\"tid\":%" PRId32 ",\"args\":{\"name\":%s}}",
                 process_.pid, process_.pid, json_quote(process_.name).c_str());
  }

  void write(FILE *out, const ftjit_thread_info &thread,
             const TraceEvent &event, const void *record) override {
    if (described_.insert(thread.tid).second)
      std::fprintf(out,
                   ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRId32
                   ",\"tid\":%" PRId32 ",\"args\":{\"name\":%s}}",
                   process_.pid, thread.tid,
                   json_quote(thread.name != nullptr ? thread.name : "").c_str());
    // ts is in microseconds; three decimals keep the nanoseconds.
    std::fprintf(out,
                 ",\n{\"ph\":\"%c\",\"ts\":%" PRIu64 ".%03" PRIu64
                 ",\"pid\":%" PRId32 ",\"tid\":%" PRId32 ",\"name\":%s",
                 event.kind == EventKind::kEntry ? 'B' : 'E',
                 event.timestamp_ns / 1000u, event.timestamp_ns % 1000u,
                 process_.pid, thread.tid, quoted_name(event.ip).c_str());
    // Arguments on the B event, the return value on the E: viewers merge
    // both into the slice's args.
    if (event.kind == EventKind::kEntry) {
      std::fprintf(out, ",\"args\":{\"caller\":\"0x%" PRIx64 "\"%s}}",
                   event.parent_ip, json_members(event.ip, record).c_str());
    } else if (event.kind == EventKind::kUnwound) {
      std::fputs(",\"args\":{\"unwound\":true}}", out);
    } else if (record != nullptr) {
      std::fprintf(out, ",\"args\":{%s}}", json_members(event.ip, record).c_str() + 1);
    } else {
      std::fputc('}', out);
    }
  }

  void finish(FILE *out, uint64_t dropped_events) override {
    std::fprintf(out,
                 "\n],\"displayTimeUnit\":\"ns\",\"otherData\":"
                 "{\"dropped_events\":\"%" PRIu64 "\"}}\n",
                 dropped_events);
  }

 private:
  const std::string &quoted_name(uint64_t ip) {
    auto [it, fresh] = quoted_.try_emplace(ip);
    if (fresh) it->second = json_quote(names_.name(ip));
    return it->second;
  }

  // ",\"fd\":3,\"path\":\"/etc\"": numbers as JSON numbers, the rest
  // as the text shows it; a return value is "return".
  std::string json_members(uint64_t ip, const void *record) const {
    std::string out;
    for (const ArgValue &v : args_.values(ip, record)) {
      out += ',';
      out += json_quote(v.name.empty() ? "return" : v.name);
      out += ':';
      switch (v.type) {
        case FTJIT_ARG_INT: out += std::to_string(v.i); break;
        case FTJIT_ARG_UINT: out += std::to_string(v.u); break;
        case FTJIT_ARG_BOOL: out += v.u != 0 ? "true" : "false"; break;
        case FTJIT_ARG_DOUBLE:
          // JSON has no NaN or infinity.
          out += v.d == v.d && v.d - v.d == 0 ? v.text : json_quote(v.text);
          break;
        default: out += json_quote(v.text);
      }
    }
    return out;
  }

  NameCache &names_;
  ProcessInfo process_;
  const ArgReader &args_;
  std::unordered_set<int32_t> described_;
  std::unordered_map<uint64_t, std::string> quoted_;
};

}  // namespace

std::unique_ptr<Writer> make_chrome_writer(NameCache &names,
                                           const ProcessInfo &process,
                                           const ArgReader &args) {
  return std::make_unique<ChromeWriter>(names, process, args);
}

}  // namespace ftjit_trace

// SPDX-License-Identifier: MIT
// trace plugin against the fake host: the function-graph text, Chrome JSON
// and Perfetto protobuf outputs, and a full buffer that drops, never blocks.
#include "fake_host.h"
#include "wire_readers.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using fake_host::Session;

constexpr uint64_t kMain = 0x401000, kParse = 0x402000, kLex = 0x403000,
                   kThrow = 0x404000, kWork = 0x405000;

void use_symbols() {
  fake_host::set_symbols({{kMain, "main"},
                          {kParse, "parse(char const*)"},
                          {kLex, "lex"},
                          {kThrow, "may_throw"},
                          {kWork, "worker::run"}});
}

// main { parse { lex } ; may_throw, unwound ; } on the calling thread,
// timestamps from `base` in steps the expectations below spell out.
void play_main(Session &session, uint64_t base) {
  fake_host::set_now(base + 0);
  session.enter(kMain, 0x400100);
  fake_host::set_now(base + 1000);
  session.enter(kParse, kMain + 0x20);
  fake_host::set_now(base + 1500);
  session.enter(kLex, kParse + 0x10);
  fake_host::set_now(base + 1750);
  session.leave(kLex, kParse + 0x10);
  fake_host::set_now(base + 3000);
  session.leave(kParse, kMain + 0x20);
  fake_host::set_now(base + 4000);
  session.enter(kThrow, kMain + 0x30);
  fake_host::set_now(base + 4100);
  session.leave(kThrow, kMain + 0x30, /*unwound=*/true);
  fake_host::set_now(base + 2'004'000);
  session.leave(kMain, 0x400100);
}

TEST(TraceTest, DescriptorFollowsTheContract) {
  Session session(FTJIT_PLUGIN_TRACE_SO);
  const ftjit_plugin &plugin = session.plugin();
  EXPECT_STREQ(plugin.name, "trace");
  EXPECT_STREQ(plugin.formats[0], "text");
  EXPECT_STREQ(plugin.formats[1], "chrome");
  EXPECT_STREQ(plugin.formats[2], "perfetto");
  EXPECT_EQ(plugin.formats[3], nullptr);
  EXPECT_GT(plugin.event_size, 0u);
  EXPECT_GT(plugin.buffer_events, 0u);
  EXPECT_NE(plugin.entry, nullptr);
  EXPECT_NE(plugin.exit, nullptr);
  EXPECT_NE(plugin.consume, nullptr);
}

TEST(TraceTest, TextIsAFunctionGraph) {
  use_symbols();
  Session session(FTJIT_PLUGIN_TRACE_SO, {}, "text");
  ASSERT_EQ(session.init(), 0) << session.error();
  fake_host::bind_thread(4242, "parser");
  play_main(session, 5'000'000'000);
  ASSERT_EQ(session.report(), 0) << session.error();
  EXPECT_EQ(session.output(),
            "# ftjit trace: CLOCK_MONOTONIC seconds; duration on exits\n"
            "#          TIMESTAMP       TID       DURATION   FUNCTION\n"
            "# thread 4242: parser\n"
            "         5.000000000 [   4242] |              | main() {\n"
            "         5.000001000 [   4242] |              |   parse(char const*) {\n"
            "         5.000001500 [   4242] |     0.250 us |     lex();\n"
            "         5.000003000 [   4242] |     2.000 us |   } /* parse(char const*) */\n"
            "         5.000004000 [   4242] |     0.100 us |   may_throw(); /* unwound */\n"
            "         5.002004000 [   4242] |     2.004 ms | } /* main */\n"
            "# 0 events dropped (thread buffer full)\n");
}

TEST(TraceTest, ChromeIsValidJsonWithBalancedSlicesPerThread) {
  use_symbols();
  Session session(FTJIT_PLUGIN_TRACE_SO, {}, "chrome");
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread([&] {
    fake_host::bind_thread(101, "main");
    play_main(session, 1'000'000);
  }).join();
  std::thread([&] {
    fake_host::bind_thread(102, "worker \"1\"");
    for (uint64_t i = 0; i < 3; ++i) {
      fake_host::set_now(2'000'000 + i * 10);
      session.enter(kWork);
      fake_host::set_now(2'000'005 + i * 10);
      session.leave(kWork);
    }
  }).join();
  session.drain();  // events before report, as the writer thread would
  ASSERT_EQ(session.report(), 0) << session.error();

  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << session.output();
  const wire::Json *events = json->get("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_EQ(events->kind, wire::Json::kArray);

  std::map<double, int> thread_names;  // tid -> metadata events
  std::map<double, std::vector<std::string>> open;
  std::map<double, double> last_ts;
  std::map<double, int> slices;
  int unwound = 0;
  for (const wire::Json &event : events->items) {
    const std::string &phase = event.get("ph")->text;
    const double tid = event.get("tid")->number;
    EXPECT_EQ(event.get("pid")->number, double(getpid()));
    if (phase == "M") {
      if (event.get("name")->text == "thread_name") ++thread_names[tid];
      continue;
    }
    EXPECT_EQ(thread_names[tid], 1) << "thread_name precedes events of " << tid;
    const double ts = event.get("ts")->number;
    EXPECT_GE(ts, last_ts[tid]);
    last_ts[tid] = ts;
    if (phase == "B") {
      open[tid].push_back(event.get("name")->text);
      ++slices[tid];
    } else {
      ASSERT_EQ(phase, "E");
      ASSERT_FALSE(open[tid].empty());
      EXPECT_EQ(open[tid].back(), event.get("name")->text);
      open[tid].pop_back();
      if (const wire::Json *args = event.get("args"))
        unwound += args->get("unwound") != nullptr;
    }
  }
  EXPECT_EQ(thread_names.size(), 2u);
  EXPECT_EQ(thread_names[101], 1);
  EXPECT_EQ(thread_names[102], 1);
  EXPECT_TRUE(open[101].empty());
  EXPECT_TRUE(open[102].empty());
  EXPECT_EQ(slices[101], 4);
  EXPECT_EQ(slices[102], 3);
  EXPECT_EQ(unwound, 1);
  // Microseconds with the nanoseconds kept as three decimals.
  EXPECT_NE(session.output().find("\"ts\":1001.500"), std::string::npos);
  EXPECT_NE(session.output().find("\"name\":\"worker \\\"1\\\"\""),
            std::string::npos);
}

// Field numbers of the Perfetto protos the test checks, restated from
// protos/perfetto/trace (the plugin keeps its own copy).
namespace pf {
constexpr uint32_t kTracePacket = 1;
constexpr uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11,
                   kInternedData = 12, kSequenceFlags = 13,
                   kTimestampClockId = 58, kTracePacketDefaults = 59,
                   kTrackDescriptor = 60;
// TracePacketDefaults, TrackEventDefaults.
constexpr uint32_t kDefaultsClockId = 58, kDefaultsTrackEvent = 11,
                   kDefaultTrackUuid = 11;
constexpr uint32_t kUuid = 1, kProcess = 3, kThread = 4, kParentUuid = 5;
constexpr uint32_t kThreadPid = 1, kThreadTid = 2, kThreadName = 5;
constexpr uint32_t kType = 9, kNameIid = 10, kTrackUuid = 11,
                   kDebugAnnotations = 4;
constexpr uint32_t kEventNames = 2, kIid = 1, kName = 2;
}  // namespace pf

uint64_t only_varint(const std::vector<wire::ProtoField> &fields,
                     uint32_t number) {
  auto matching = wire::fields_numbered(fields, number);
  EXPECT_EQ(matching.size(), 1u) << "field " << number;
  EXPECT_TRUE(matching.empty() || matching[0].wire_type == 0);
  return matching.empty() ? 0 : matching[0].value;
}

std::vector<wire::ProtoField> only_message(
    const std::vector<wire::ProtoField> &fields, uint32_t number) {
  auto matching = wire::fields_numbered(fields, number);
  EXPECT_EQ(matching.size(), 1u) << "field " << number;
  if (matching.size() != 1 || matching[0].wire_type != 2) return {};
  auto parsed = wire::parse_proto(matching[0].bytes);
  EXPECT_TRUE(parsed) << "field " << number << " is no message";
  return parsed ? *parsed : std::vector<wire::ProtoField>{};
}

TEST(TraceTest, PerfettoDecodesToDescribedBalancedTracks) {
  use_symbols();
  Session session(FTJIT_PLUGIN_TRACE_SO, {}, "perfetto");
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread([&] {
    fake_host::bind_thread(201, "main");
    play_main(session, 7'000'000);
  }).join();
  std::thread([&] {
    fake_host::bind_thread(202, "worker");
    fake_host::set_now(7'000'500);
    session.enter(kWork);
    session.enter(kLex);
    fake_host::set_now(7'000'900);
    session.leave(kLex);
    session.leave(kWork);
  }).join();
  ASSERT_EQ(session.report(), 0) << session.error();

  const std::string bytes = session.output();
  auto trace = wire::parse_proto(bytes);
  ASSERT_TRUE(trace) << "not a protobuf message";
  ASSERT_FALSE(trace->empty());

  // One packet sequence per thread: a sequence is one in-order writer, and
  // only a thread's own events are in time order. Each starts with its
  // thread's descriptor, which clears that sequence's interned names.
  uint64_t process_uuid = 0;
  std::map<uint64_t, int64_t> track_tid;          // described thread tracks
  std::map<uint64_t, uint64_t> track_sequence;    // track -> its sequence
  std::map<uint64_t, std::map<uint64_t, std::string>> interned;  // seq -> iid -> name
  std::map<uint64_t, std::vector<std::string>> open;
  std::map<uint64_t, uint64_t> last_timestamp;    // per sequence
  // Per sequence, its TracePacketDefaults: the clock and the track of its
  // events that do not say theirs.
  std::map<uint64_t, uint64_t> default_clock, default_track;
  std::map<int64_t, int> begins_by_tid;
  int unwound_ends = 0;
  uint64_t process_sequence = 0;
  for (size_t i = 0; i < trace->size(); ++i) {
    const wire::ProtoField &outer = (*trace)[i];
    ASSERT_EQ(outer.number, pf::kTracePacket);
    ASSERT_EQ(outer.wire_type, 2u);
    auto packet = wire::parse_proto(outer.bytes);
    ASSERT_TRUE(packet) << "packet " << i;
    const uint64_t sequence = only_varint(*packet, pf::kSequenceId);
    EXPECT_NE(sequence, 0u);
    auto flags = wire::fields_numbered(*packet, pf::kSequenceFlags);
    if (i == 0) {
      // The first packet clears incremental state and describes the process.
      ASSERT_EQ(flags.size(), 1u);
      EXPECT_EQ(flags[0].value, 1u);
      process_sequence = sequence;
      auto track = only_message(*packet, pf::kTrackDescriptor);
      process_uuid = only_varint(track, pf::kUuid);
      auto process = only_message(track, pf::kProcess);
      EXPECT_EQ(only_varint(process, 1), uint64_t(getpid()));
      continue;
    }
    if (!wire::fields_numbered(*packet, pf::kTrackDescriptor).empty()) {
      auto track = only_message(*packet, pf::kTrackDescriptor);
      EXPECT_EQ(only_varint(track, pf::kParentUuid), process_uuid);
      auto thread = only_message(track, pf::kThread);
      EXPECT_EQ(only_varint(thread, pf::kThreadPid), uint64_t(getpid()));
      const int64_t tid = int64_t(only_varint(thread, pf::kThreadTid));
      auto name = wire::fields_numbered(thread, pf::kThreadName);
      ASSERT_EQ(name.size(), 1u);
      EXPECT_EQ(std::string(name[0].bytes), tid == 201 ? "main" : "worker");
      EXPECT_TRUE(track_tid.emplace(only_varint(track, pf::kUuid), tid).second)
          << "thread described twice";
      // A sequence of its own, started here with cleared state.
      EXPECT_NE(sequence, process_sequence);
      for (const auto &[t, seq] : track_sequence) EXPECT_NE(seq, sequence);
      track_sequence[only_varint(track, pf::kUuid)] = sequence;
      ASSERT_EQ(flags.size(), 1u);
      EXPECT_EQ(flags[0].value, 1u);
      // With the state cleared, the sequence's defaults: CLOCK_MONOTONIC
      // (builtin clock 3) and the thread's own track.
      auto defaults = only_message(*packet, pf::kTracePacketDefaults);
      default_clock[sequence] = only_varint(defaults, pf::kDefaultsClockId);
      auto event_defaults = only_message(defaults, pf::kDefaultsTrackEvent);
      default_track[sequence] = only_varint(event_defaults, pf::kDefaultTrackUuid);
      EXPECT_EQ(default_clock[sequence], 3u);
      EXPECT_EQ(default_track[sequence], only_varint(track, pf::kUuid));
      continue;
    }
    // An event: on its thread's sequence, needing the state its descriptor
    // cleared (the defaults too), stamped with CLOCK_MONOTONIC.
    ASSERT_EQ(flags.size(), 1u);
    EXPECT_EQ(flags[0].value, 2u);
    ASSERT_TRUE(default_clock.count(sequence)) << "an event before its sequence's defaults";
    const auto clock = wire::fields_numbered(*packet, pf::kTimestampClockId);
    EXPECT_EQ(clock.empty() ? default_clock[sequence] : clock[0].value, 3u);
    for (const auto &data : wire::fields_numbered(*packet, pf::kInternedData)) {
      auto interned_data = wire::parse_proto(data.bytes);
      ASSERT_TRUE(interned_data);
      for (const auto &entry :
           wire::fields_numbered(*interned_data, pf::kEventNames)) {
        auto name = wire::parse_proto(entry.bytes);
        ASSERT_TRUE(name);
        const uint64_t iid = only_varint(*name, pf::kIid);
        EXPECT_TRUE(interned[sequence]
                        .emplace(iid, std::string(wire::fields_numbered(
                                                      *name, pf::kName)[0]
                                                      .bytes))
                        .second)
            << "iid " << iid << " interned twice on sequence " << sequence;
      }
    }
    const uint64_t timestamp = only_varint(*packet, pf::kTimestamp);
    auto event = only_message(*packet, pf::kTrackEvent);
    const auto track_field = wire::fields_numbered(event, pf::kTrackUuid);
    const uint64_t track = track_field.empty() ? default_track[sequence] : track_field[0].value;
    ASSERT_TRUE(track_tid.count(track)) << "event before its track descriptor";
    EXPECT_EQ(track_sequence[track], sequence) << "event on another thread's sequence";
    EXPECT_GE(timestamp, last_timestamp[sequence]);
    last_timestamp[sequence] = timestamp;
    const uint64_t type = only_varint(event, pf::kType);
    if (type == 1) {
      const uint64_t iid = only_varint(event, pf::kNameIid);
      ASSERT_TRUE(interned[sequence].count(iid)) << "iid used before it is interned";
      open[track].push_back(interned[sequence][iid]);
      ++begins_by_tid[track_tid[track]];
    } else {
      ASSERT_EQ(type, 2u);
      ASSERT_FALSE(open[track].empty()) << "end without begin";
      open[track].pop_back();
      unwound_ends +=
          !wire::fields_numbered(event, pf::kDebugAnnotations).empty();
    }
  }
  EXPECT_EQ(track_tid.size(), 2u);
  for (const auto &[track, names] : open) EXPECT_TRUE(names.empty());
  EXPECT_EQ(begins_by_tid[201], 4);
  EXPECT_EQ(begins_by_tid[202], 2);
  EXPECT_EQ(unwound_ends, 1);
  // Each function's name is interned once per sequence that uses it, with
  // the host's symbol (main's thread calls 4 functions, worker's 2).
  std::set<std::string> names;
  size_t n_interned = 0;
  for (const auto &[seq, by_iid] : interned) {
    n_interned += by_iid.size();
    for (const auto &[iid, name] : by_iid) names.insert(name);
  }
  EXPECT_EQ(n_interned, 6u);
  EXPECT_EQ(names, (std::set<std::string>{"main", "parse(char const*)", "lex",
                                          "may_throw", "worker::run"}));
}

TEST(TraceTest, FullBufferDropsAndCountsWithoutBlocking) {
  use_symbols();
  Session session(FTJIT_PLUGIN_TRACE_SO, {}, "text", /*buffer_events=*/4);
  ASSERT_EQ(session.init(), 0) << session.error();
  fake_host::bind_thread(7, "busy");
  fake_host::set_now(1'000'000'000);
  // 10 calls of 4 events into 4 slots, drained once after the first call:
  // the other 9 calls fill the ring with their first call and drop 32.
  for (int i = 0; i < 10; ++i) {
    session.enter(kMain);
    session.enter(kLex);
    session.leave(kLex);
    session.leave(kMain);
    if (i == 0) session.drain();  // the writer frees the ring once
  }
  EXPECT_EQ(session.events_dropped(), 32u);
  session.drain();
  // After the drops the depth still matches: a new call starts at the left.
  session.enter(kWork);
  session.leave(kWork);
  ASSERT_EQ(session.report(), 0) << session.error();
  const std::string text = session.output();
  EXPECT_NE(text.find("# 32 events dropped (thread buffer full)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("| worker::run();\n"), std::string::npos) << text;
}

TEST(TraceTest, InitRefusesAnUnknownFormat) {
  Session session(FTJIT_PLUGIN_TRACE_SO, {}, "xml");
  EXPECT_NE(session.init(), 0);
  EXPECT_NE(session.error().find("xml"), std::string::npos) << session.error();
}

TEST(TraceTest, InstancesInEveryFormatStayApartAndNameTheHostsProcess) {
  use_symbols();
  // Not this process: the writers must ask the host, not getpid() or /proc.
  const fake_host::ProcessOverride process(4321, "svc \"main\"");
  Session text(FTJIT_PLUGIN_TRACE_SO, {}, "text");
  Session chrome(FTJIT_PLUGIN_TRACE_SO, {}, "chrome", /*buffer_events=*/2);
  Session perfetto(FTJIT_PLUGIN_TRACE_SO, {}, "perfetto");
  ASSERT_EQ(text.init(), 0) << text.error();
  ASSERT_EQ(chrome.init(), 0) << chrome.error();
  ASSERT_EQ(perfetto.init(), 0) << perfetto.error();
  // Interleaved on one thread: each instance has its own depth and ring.
  fake_host::bind_thread(301, "both");
  fake_host::set_now(1000);
  text.enter(kMain);
  chrome.enter(kWork);
  perfetto.enter(kParse);
  fake_host::set_now(1500);
  text.enter(kLex);
  fake_host::set_now(1750);
  text.leave(kLex);
  fake_host::set_now(2000);
  chrome.leave(kWork);
  chrome.enter(kLex);  // chrome's ring of 2 is full: both dropped
  chrome.leave(kLex);
  fake_host::set_now(3000);
  perfetto.leave(kParse);
  fake_host::set_now(4000);
  text.leave(kMain);
  EXPECT_EQ(text.events_dropped(), 0u);
  EXPECT_EQ(chrome.events_dropped(), 2u);
  EXPECT_EQ(perfetto.events_dropped(), 0u);
  ASSERT_EQ(text.report(), 0) << text.error();
  ASSERT_EQ(chrome.report(), 0) << chrome.error();
  ASSERT_EQ(perfetto.report(), 0) << perfetto.error();

  EXPECT_EQ(text.output(),
            "# ftjit trace: CLOCK_MONOTONIC seconds; duration on exits\n"
            "#          TIMESTAMP       TID       DURATION   FUNCTION\n"
            "# thread 301: both\n"
            "         0.000001000 [    301] |              | main() {\n"
            "         0.000001500 [    301] |     0.250 us |   lex();\n"
            "         0.000004000 [    301] |     3.000 us | } /* main */\n"
            "# 0 events dropped (thread buffer full)\n");

  std::string error;
  auto json = wire::parse_json(chrome.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << chrome.output();
  std::vector<std::string> slices;
  std::string process_name;
  for (const wire::Json &event : json->get("traceEvents")->items) {
    EXPECT_EQ(event.get("pid")->number, 4321);
    if (event.get("ph")->text == "M") {
      if (event.get("name")->text == "process_name")
        process_name = event.get("args")->get("name")->text;
      continue;
    }
    slices.push_back(event.get("ph")->text + " " + event.get("name")->text);
  }
  EXPECT_EQ(process_name, "svc \"main\"");
  EXPECT_EQ(slices,
            (std::vector<std::string>{"B worker::run", "E worker::run"}));
  EXPECT_EQ(json->get("otherData")->get("dropped_events")->text, "2");

  const std::string bytes = perfetto.output();  // the fields point into it
  auto trace = wire::parse_proto(bytes);
  ASSERT_TRUE(trace) << "not a protobuf message";
  std::vector<std::string> interned;
  int slice_events = 0;
  for (size_t i = 0; i < trace->size(); ++i) {
    auto packet = wire::parse_proto((*trace)[i].bytes);
    ASSERT_TRUE(packet) << "packet " << i;
    if (!wire::fields_numbered(*packet, pf::kTrackDescriptor).empty()) {
      auto track = only_message(*packet, pf::kTrackDescriptor);
      if (i == 0) {
        auto described = only_message(track, pf::kProcess);
        EXPECT_EQ(only_varint(described, 1), 4321u);  // ProcessDescriptor.pid
        auto name = wire::fields_numbered(described, 6);  // .process_name
        ASSERT_EQ(name.size(), 1u);
        EXPECT_EQ(std::string(name[0].bytes), "svc \"main\"");
      } else {
        auto thread = only_message(track, pf::kThread);
        EXPECT_EQ(only_varint(thread, pf::kThreadPid), 4321u);
        EXPECT_EQ(only_varint(thread, pf::kThreadTid), 301u);
      }
      continue;
    }
    ++slice_events;
    for (const auto &data : wire::fields_numbered(*packet, pf::kInternedData)) {
      auto interned_data = wire::parse_proto(data.bytes);
      ASSERT_TRUE(interned_data);
      for (const auto &entry :
           wire::fields_numbered(*interned_data, pf::kEventNames)) {
        auto name = wire::parse_proto(entry.bytes);
        ASSERT_TRUE(name);
        interned.emplace_back(wire::fields_numbered(*name, pf::kName)[0].bytes);
      }
    }
  }
  EXPECT_EQ(slice_events, 2);
  EXPECT_EQ(interned, (std::vector<std::string>{"parse(char const*)"}));
}

TEST(TraceTest, InitRefusesAHostWithoutInstanceData) {
  for (const size_t size : {offsetof(ftjit_host, set_instance_data),
                            offsetof(ftjit_host, process_name)}) {
    Session session(FTJIT_PLUGIN_TRACE_SO, {}, "chrome", 0,
                    fake_host::host_of_size(uint32_t(size)));
    EXPECT_NE(session.init(), 0) << size;
    EXPECT_NE(session.error().find("host is too old"), std::string::npos)
        << session.error();
  }
}

}  // namespace

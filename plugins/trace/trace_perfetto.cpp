// SPDX-License-Identifier: MIT
// trace plugin, perfetto format: Perfetto's native trace, a protobuf `Trace`
// written one `packet` at a time. A packet sequence stands for one writer
// whose packets are in time order, so each traced thread gets its own: the
// writer thread drains the threads' buffers in turn, and only within one
// thread are events in time order. Sequence 1 carries the process
// TrackDescriptor; a thread's sequence starts with its TrackDescriptor
// (which clears that sequence's incremental state), then one TrackEvent
// slice begin or end per event, with function names interned per sequence.
// Timestamps are CLOCK_MONOTONIC, said on every event (Perfetto assumes
// BOOTTIME otherwise).
#include "proto_writer.h"
#include "trace_writers.h"

#include <unordered_map>

namespace ftjit_trace {
namespace {

// Field numbers, from protos/perfetto/trace/ (trace.proto, trace_packet.proto,
// track_event/*.proto, interned_data/interned_data.proto).
constexpr uint32_t kTracePacket = 1;

constexpr uint32_t kPacketTimestamp = 8;
constexpr uint32_t kPacketTimestampClockId = 58;
constexpr uint64_t kBuiltinClockMonotonic = 3;
constexpr uint32_t kPacketTrustedSequenceId = 10;
constexpr uint32_t kPacketTrackEvent = 11;
constexpr uint32_t kPacketInternedData = 12;
constexpr uint32_t kPacketSequenceFlags = 13;
constexpr uint32_t kPacketTrackDescriptor = 60;
constexpr uint64_t kSeqIncrementalStateCleared = 1;
constexpr uint64_t kSeqNeedsIncrementalState = 2;

constexpr uint32_t kTrackUuid = 1;
constexpr uint32_t kTrackProcess = 3;
constexpr uint32_t kTrackThread = 4;
constexpr uint32_t kTrackParentUuid = 5;

constexpr uint32_t kProcessPid = 1;
constexpr uint32_t kProcessName = 6;

constexpr uint32_t kThreadPid = 1;
constexpr uint32_t kThreadTid = 2;
constexpr uint32_t kThreadName = 5;

constexpr uint32_t kEventDebugAnnotations = 4;
constexpr uint32_t kEventType = 9;
constexpr uint32_t kEventNameIid = 10;
constexpr uint32_t kEventTrackUuid = 11;
constexpr uint64_t kTypeSliceBegin = 1;
constexpr uint64_t kTypeSliceEnd = 2;

constexpr uint32_t kInternedEventNames = 2;
constexpr uint32_t kEventNameEntryIid = 1;  // EventName.iid
constexpr uint32_t kEventNameName = 2;  // EventName.name

// DebugAnnotation (track_event/debug_annotation.proto).
constexpr uint32_t kAnnotationBoolValue = 2;
constexpr uint32_t kAnnotationUintValue = 3;
constexpr uint32_t kAnnotationIntValue = 4;
constexpr uint32_t kAnnotationDoubleValue = 5;
constexpr uint32_t kAnnotationStringValue = 6;
constexpr uint32_t kAnnotationPointerValue = 7;
constexpr uint32_t kAnnotationName = 10;

// The process descriptor's sequence; threads get 2, 3, ... (any value but
// 0 does).
constexpr uint64_t kProcessSequenceId = 1;

class PerfettoWriter final : public Writer {
 public:
  PerfettoWriter(NameCache &names, const ProcessInfo &process, const ArgReader &args)
      : names_(names), process_(process), args_(args) {}

  void start(FILE *out) override {
    ProtoWriter process;
    process.int32_field(kProcessPid, process_.pid);
    process.bytes_field(kProcessName, process_.name);
    ProtoWriter track;
    track.varint_field(kTrackUuid, process_uuid());
    track.message_field(kTrackProcess, process);
    packet_.clear();
    packet_.varint_field(kPacketTrustedSequenceId, kProcessSequenceId);
    packet_.varint_field(kPacketSequenceFlags, kSeqIncrementalStateCleared);
    packet_.message_field(kPacketTrackDescriptor, track);
    emit(out);
  }

  void write(FILE *out, const ftjit_thread_info &thread,
             const TraceEvent &event, const void *record) override {
    // Events come a thread's run at a time: one lookup per run.
    if (last_ == nullptr || last_tid_ != thread.tid) {
      auto [seq, first] = sequences_.try_emplace(thread.tid);
      if (first) {
        seq->second.id = kProcessSequenceId + sequences_.size();
        describe_thread(out, thread, seq->second.id);
      }
      last_ = &seq->second;  // node-stable
      last_tid_ = thread.tid;
    }
    Sequence &sequence = *last_;

    event_.clear();
    event_.varint_field(kEventType, event.kind == EventKind::kEntry
                                        ? kTypeSliceBegin
                                        : kTypeSliceEnd);
    event_.varint_field(kEventTrackUuid, thread_uuid(thread.tid));
    packet_.clear();
    packet_.varint_field(kPacketTimestamp, event.timestamp_ns);
    packet_.varint_field(kPacketTimestampClockId, kBuiltinClockMonotonic);
    packet_.varint_field(kPacketTrustedSequenceId, sequence.id);
    packet_.varint_field(kPacketSequenceFlags, kSeqNeedsIncrementalState);
    if (event.kind == EventKind::kEntry) {
      auto [it, fresh] = sequence.iids.try_emplace(event.ip, sequence.iids.size() + 1);
      if (fresh) {
        ProtoWriter name;
        name.varint_field(kEventNameEntryIid, it->second);
        name.bytes_field(kEventNameName, names_.name(event.ip));
        ProtoWriter interned;
        interned.message_field(kInternedEventNames, name);
        packet_.message_field(kPacketInternedData, interned);
      }
      event_.varint_field(kEventNameIid, it->second);
    } else if (event.kind == EventKind::kUnwound) {
      ProtoWriter annotation;
      annotation.bytes_field(kAnnotationName, "unwound");
      annotation.varint_field(kAnnotationBoolValue, 1);
      event_.message_field(kEventDebugAnnotations, annotation);
    }
    // Arguments on the slice's begin, the return value on its end: the
    // UI shows both in the slice's details.
    if (record != nullptr) {
      for (const ArgValue &v : args_.values(event.ip, record)) annotate(v);
    }
    packet_.message_field(kPacketTrackEvent, event_);
    emit(out);
  }

  void finish(FILE *, uint64_t) override {}

 private:
  // Process and thread tracks need uuids unique in the trace; these keep the
  // two kinds apart by their top bits.
  uint64_t process_uuid() const {
    return (uint64_t(1) << 62) | uint32_t(process_.pid);
  }
  uint64_t thread_uuid(int32_t tid) const {
    return (uint64_t(1) << 63) | (uint64_t(uint32_t(process_.pid)) << 32) |
           uint32_t(tid);
  }

  void describe_thread(FILE *out, const ftjit_thread_info &thread, uint64_t sequence_id) {
    ProtoWriter descriptor;
    descriptor.int32_field(kThreadPid, process_.pid);
    descriptor.int32_field(kThreadTid, thread.tid);
    descriptor.bytes_field(kThreadName,
                           thread.name != nullptr ? thread.name : "");
    ProtoWriter track;
    track.varint_field(kTrackUuid, thread_uuid(thread.tid));
    track.varint_field(kTrackParentUuid, process_uuid());
    track.message_field(kTrackThread, descriptor);
    packet_.clear();
    packet_.varint_field(kPacketTrustedSequenceId, sequence_id);
    packet_.varint_field(kPacketSequenceFlags, kSeqIncrementalStateCleared);
    packet_.message_field(kPacketTrackDescriptor, track);
    emit(out);
  }

  void annotate(const ArgValue &v) {
    ProtoWriter a;
    a.bytes_field(kAnnotationName, v.name.empty() ? "return" : v.name);
    switch (v.type) {
      case FTJIT_ARG_INT: a.varint_field(kAnnotationIntValue, static_cast<uint64_t>(v.i)); break;
      case FTJIT_ARG_UINT: a.varint_field(kAnnotationUintValue, v.u); break;
      case FTJIT_ARG_BOOL: a.varint_field(kAnnotationBoolValue, v.u != 0); break;
      case FTJIT_ARG_DOUBLE: a.double_field(kAnnotationDoubleValue, v.d); break;
      case FTJIT_ARG_POINTER: a.varint_field(kAnnotationPointerValue, v.u); break;
      default: a.bytes_field(kAnnotationStringValue, v.text);
    }
    event_.message_field(kEventDebugAnnotations, a);
  }

  void emit(FILE *out) {
    frame_.clear();
    frame_.message_field(kTracePacket, packet_);
    // Only the host's writer thread writes `out` while events come, and
    // report() runs after it: the stream's lock buys nothing per event.
    fwrite_unlocked(frame_.bytes().data(), 1, frame_.bytes().size(), out);
  }

  NameCache &names_;
  ProcessInfo process_;
  const ArgReader &args_;
  // One packet sequence per traced thread, with its own interned names.
  struct Sequence {
    uint64_t id = 0;
    std::unordered_map<uint64_t, uint64_t> iids;  // ip -> interned name id
  };
  std::unordered_map<int32_t, Sequence> sequences_;  // by tid
  Sequence *last_ = nullptr;  // the sequence of the last event's thread
  int32_t last_tid_ = 0;
  ProtoWriter event_, packet_, frame_;           // reused: no per-event growth
};

}  // namespace

std::unique_ptr<Writer> make_perfetto_writer(NameCache &names,
                                             const ProcessInfo &process,
                                             const ArgReader &args) {
  return std::make_unique<PerfettoWriter>(names, process, args);
}

}  // namespace ftjit_trace

// SPDX-License-Identifier: MIT
// trace plugin, perfetto format: Perfetto's native trace, a protobuf `Trace`
// written one `packet` at a time. A packet sequence stands for one writer
// whose packets are in time order, so each traced thread gets its own: the
// writer thread drains the threads' buffers in turn, and only within one
// thread are events in time order. Sequence 1 carries the process
// TrackDescriptor; a thread's sequence starts with its TrackDescriptor
// (which clears that sequence's incremental state) and the sequence's
// TracePacketDefaults, then one TrackEvent slice begin or end per event,
// with function names interned per sequence. The defaults say once per
// thread what every event would repeat: its timestamps are CLOCK_MONOTONIC
// (Perfetto assumes BOOTTIME otherwise) and its track is the thread's. A
// plain event takes 16-19 bytes instead of 30-33: a trace of 15 M events
// is 200 MB less to write.
//
// Most events are a plain slice begin of a name already interned or a
// plain slice end: those are encoded straight into one small buffer from
// bytes precomputed per sequence (plain_packet). The rest (a name's first
// use on a sequence, arguments, an unwound frame) go through ProtoWriter.
// Both give the same fields, so no reader can tell which path wrote a
// packet.
#include "proto_writer.h"
#include "trace_writers.h"

#include <cstring>
#include <unordered_map>
#include <vector>

namespace ftjit_trace {
namespace {

// Field numbers, from protos/perfetto/trace/ (trace.proto, trace_packet.proto,
// track_event/*.proto, interned_data/interned_data.proto).
constexpr uint32_t kTracePacket = 1;

constexpr uint32_t kPacketTimestamp = 8;
constexpr uint64_t kBuiltinClockMonotonic = 3;
constexpr uint32_t kPacketTrustedSequenceId = 10;
constexpr uint32_t kPacketTrackEvent = 11;
constexpr uint32_t kPacketInternedData = 12;
constexpr uint32_t kPacketSequenceFlags = 13;
constexpr uint32_t kPacketTracePacketDefaults = 59;
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
constexpr uint64_t kTypeSliceBegin = 1;
constexpr uint64_t kTypeSliceEnd = 2;

// TracePacketDefaults and TrackEventDefaults (trace_packet_defaults.proto,
// track_event/track_event.proto).
constexpr uint32_t kDefaultsTimestampClockId = 58;
constexpr uint32_t kDefaultsTrackEvent = 11;
constexpr uint32_t kTrackEventDefaultsTrackUuid = 11;

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

// ip -> interned name id (1, 2, ...) of one sequence: open addressing,
// looked up on every slice begin, so one probe in the common case and no
// node to chase (std::unordered_map's lookup cost more than the rest of
// a begin's encoding).
class IidTable {
 public:
  //! 0: not interned yet.
  uint64_t find(uint64_t ip) const {
    if (slots_.empty()) return 0;
    for (size_t i = slot_of(ip);; i = (i + 1) & mask_) {
      if (slots_[i].iid == 0) return 0;
      if (slots_[i].ip == ip) return slots_[i].iid;
    }
  }
  //! Interns ip (not interned yet): its new id.
  uint64_t insert(uint64_t ip) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const uint64_t iid = ++size_;
    place(ip, iid);
    return iid;
  }

 private:
  struct Slot {
    uint64_t ip = 0;
    uint64_t iid = 0;  // 0: empty
  };
  size_t slot_of(uint64_t ip) const {
    return static_cast<size_t>((ip * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }
  void place(uint64_t ip, uint64_t iid) {
    size_t i = slot_of(ip);
    while (slots_[i].iid != 0) i = (i + 1) & mask_;
    slots_[i] = {ip, iid};
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot &s : old) {
      if (s.iid != 0) place(s.ip, s.iid);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint64_t size_ = 0;
};

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
    Sequence &sequence = sequence_of(out, thread);
    uint8_t buf[kMaxPlainPacket];
    if (uint8_t *end = plain_packet(buf, sequence, event, record); end != nullptr) {
      fwrite_unlocked(buf, 1, static_cast<size_t>(end - buf), out);
      return;
    }
    other_packet(out, sequence, event, record);
  }

  // A run's plain packets go to one buffer, written when full and at the
  // run's end: one fwrite for hundreds of events.
  void write_run(FILE *out, const ftjit_thread_info &thread, const uint8_t *events, size_t n,
                 size_t stride) override {
    Sequence &sequence = sequence_of(out, thread);
    uint8_t *p = run_;
    auto write_out = [&] {
      fwrite_unlocked(run_, 1, static_cast<size_t>(p - run_), out);
      p = run_;
    };
    for (size_t i = 0; i < n; ++i) {
      const auto &event = *reinterpret_cast<const TraceEvent *>(events + i * stride);
      const void *record = event.has_record != 0 ? &event + 1 : nullptr;
      if (p + kMaxPlainPacket > run_ + sizeof run_) write_out();
      if (uint8_t *end = plain_packet(p, sequence, event, record); end != nullptr) {
        p = end;
        continue;
      }
      write_out();  // in order: what the run encoded so far first
      other_packet(out, sequence, event, record);
    }
    write_out();
  }

  void finish(FILE *, uint64_t) override {}

 private:
  // The sequence of `thread`, described (first packet) when new.
  struct Sequence;
  Sequence &sequence_of(FILE *out, const ftjit_thread_info &thread) {
    // Events come a thread's run at a time: one lookup per run.
    if (last_ == nullptr || last_tid_ != thread.tid) {
      auto [seq, first] = sequences_.try_emplace(thread.tid);
      if (first) {
        seq->second.id = kProcessSequenceId + sequences_.size();
        seq->second.precompute();
        describe_thread(out, thread, seq->second.id);
      }
      last_ = &seq->second;  // node-stable
      last_tid_ = thread.tid;
    }
    return *last_;
  }

  // Any event plain_packet does not take: through ProtoWriter.
  void other_packet(FILE *out, Sequence &sequence, const TraceEvent &event, const void *record) {
    event_.clear();
    event_.varint_field(kEventType, event.kind == EventKind::kEntry
                                        ? kTypeSliceBegin
                                        : kTypeSliceEnd);
    packet_.clear();
    packet_.varint_field(kPacketTimestamp, event.timestamp_ns);
    packet_.varint_field(kPacketTrustedSequenceId, sequence.id);
    packet_.varint_field(kPacketSequenceFlags, kSeqNeedsIncrementalState);
    if (event.kind == EventKind::kEntry) {
      uint64_t iid = sequence.iids.find(event.ip);
      if (iid == 0) {
        iid = sequence.iids.insert(event.ip);
        ProtoWriter name;
        name.varint_field(kEventNameEntryIid, iid);
        name.bytes_field(kEventNameName, names_.name(event.ip));
        ProtoWriter interned;
        interned.message_field(kInternedEventNames, name);
        packet_.message_field(kPacketInternedData, interned);
      }
      event_.varint_field(kEventNameIid, iid);
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
    // Incremental state that the flag below clears, so they come with it
    // (readers apply a packet's defaults before its other fields).
    ProtoWriter event_defaults;
    event_defaults.varint_field(kTrackEventDefaultsTrackUuid, thread_uuid(thread.tid));
    ProtoWriter defaults;
    defaults.varint_field(kDefaultsTimestampClockId, kBuiltinClockMonotonic);
    defaults.message_field(kDefaultsTrackEvent, event_defaults);
    packet_.clear();
    packet_.varint_field(kPacketTrustedSequenceId, sequence_id);
    packet_.varint_field(kPacketSequenceFlags, kSeqIncrementalStateCleared);
    packet_.message_field(kPacketTracePacketDefaults, defaults);
    packet_.message_field(kPacketTrackDescriptor, track);
    emit(out);
  }

  // A plain slice begin (of a name interned already) or end, what most
  // events are, encoded at `p`:
  //
  //   0A len                  Trace.packet
  //     40 <timestamp>        timestamp (clock: the sequence's default)
  //     50 <sequence id>      trusted_packet_sequence_id          middle
  //     68 02                 sequence_flags = NEEDS_INCREMENTAL  middle
  //     5A                    track_event                         middle
  //        len                (track: the sequence's default)
  //        48 01|02           type = SLICE_BEGIN | SLICE_END
  //        50 <iid>           name_iid (begins only)
  //
  // At most 41 bytes, so both lengths fit one varint byte; the middle is
  // copied whole (a fixed-size copy), so p needs kMaxPlainPacket bytes.
  // Returns the end of the packet, or nullptr for any other event (the
  // name's first begin, arguments, an unwound frame): nothing written.
  static constexpr size_t kMaxPlainPacket = 48;
  uint8_t *plain_packet(uint8_t *p, const Sequence &seq, const TraceEvent &event,
                        const void *record) {
    if (record != nullptr || event.kind == EventKind::kUnwound) return nullptr;
    uint64_t iid = 0;
    if (event.kind == EventKind::kEntry) {
      iid = seq.iids.find(event.ip);
      if (iid == 0) return nullptr;
    }
    uint8_t *const start = p;
    p += 2;
    p = put_tag(p, kPacketTimestamp, ProtoWriter::kVarint);
    p = put_varint(p, event.timestamp_ns);
    std::memcpy(p, seq.middle, sizeof seq.middle);
    p += seq.middle_size;
    uint8_t *event_size = p++;
    p = put_tag(p, kEventType, ProtoWriter::kVarint);
    *p++ = static_cast<uint8_t>(iid != 0 ? kTypeSliceBegin : kTypeSliceEnd);
    if (iid != 0) {
      p = put_tag(p, kEventNameIid, ProtoWriter::kVarint);
      p = put_varint(p, iid);
    }
    *event_size = static_cast<uint8_t>(p - event_size - 1);
    start[0] = static_cast<uint8_t>((kTracePacket << 3) | ProtoWriter::kLengthDelimited);
    start[1] = static_cast<uint8_t>(p - start - 2);
    return p;
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
  // One packet sequence per traced thread, with its own interned names and
  // the bytes of it that every plain packet repeats: from its
  // trusted_packet_sequence_id to its track event's length (excluded).
  struct Sequence {
    uint64_t id = 0;
    IidTable iids;
    uint8_t middle[16];
    uint8_t middle_size = 0;

    void precompute() {
      uint8_t *p = middle;
      p = put_tag(p, kPacketTrustedSequenceId, ProtoWriter::kVarint);
      p = put_varint(p, id);
      p = put_tag(p, kPacketSequenceFlags, ProtoWriter::kVarint);
      p = put_varint(p, kSeqNeedsIncrementalState);
      p = put_tag(p, kPacketTrackEvent, ProtoWriter::kLengthDelimited);
      middle_size = static_cast<uint8_t>(p - middle);
    }
  };
  std::unordered_map<int32_t, Sequence> sequences_;  // by tid
  Sequence *last_ = nullptr;  // the sequence of the last event's thread
  int32_t last_tid_ = 0;
  ProtoWriter event_, packet_, frame_;           // reused: no per-event growth
  uint8_t run_[64 * 1024];                       // write_run's packets
};

}  // namespace

std::unique_ptr<Writer> make_perfetto_writer(NameCache &names,
                                             const ProcessInfo &process,
                                             const ArgReader &args) {
  return std::make_unique<PerfettoWriter>(names, process, args);
}

}  // namespace ftjit_trace

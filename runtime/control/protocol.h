// SPDX-License-Identifier: MIT
// The control channel between the `ftjit` CLI and the agent in a traced
// process: a Unix stream socket in a 0700 directory, peer credentials
// checked, carrying framed messages.
//
//   frame    u32 length of what follows (<= kMaxFrame)
//            u16 type (MsgType)
//            payload: fields in a fixed order per type, little endian:
//              u8 u32 i32 u64 i64   as is
//              string               u32 length (<= kMaxString), bytes
//              list                 u32 count (<= kMaxList), items
//
// A decoder takes nothing on trust: every length is checked against what
// is left, every enum against its range, and a payload must be consumed
// exactly. The agent runs the decoder inside the traced process, on bytes
// from whoever reached the socket, so a hostile frame must only ever give
// an error (tests/fuzz/control_fuzz.cpp).
//
// Conversation (CLI -> agent unless marked <-):
//   <- Hello                       on every connection, first
//   Generator                      this connection now serves code:
//   <- Generate, Generated           the agent asks, the CLI answers
//   Attach [+ output fds]          plugins, filters, strategy, format
//   <- Reply                       attached (or why not)
//   Status / Detach                <- Reply (text: the status, the report)
//   <- Exited                      the process is exiting: the final report
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "core/arg_capture_spec.h"
#include "core/dwarf_producers.h"
#include "core/module_file.h"
#include "core/error.h"
#include "core/record_control.h"

namespace ftjit::control {

inline constexpr uint32_t kProtocolVersion = 13;  // 3: Reply::phases; 4: site code; 5: inline;
                                                 // 6: inline latency; 7: buffer policies, flush;
                                                 // 8: relocated entries' branch; 9: arguments;
                                                 // 10: producers from the generator, --by-arg;
                                                 // 11: a format and a file per plugin;
                                                 // 12: record control (depth, sampling...),
                                                 //     live control; 13: producers in Attach
inline constexpr uint32_t kMaxFrame = 64u << 20;   // reports of big traces
inline constexpr uint32_t kMaxString = 32u << 20;
inline constexpr uint32_t kMaxList = 4096;
// What the agent accepts: an Attach carries the signatures of every
// function whose arguments are captured (a few hundred bytes each).
inline constexpr uint32_t kMaxRequest = 16u << 20;

enum class MsgType : uint16_t {
  kHello = 1,
  kGenerator = 2,
  kGenerate = 3,
  kGenerated = 4,
  kAttach = 5,
  kDetach = 6,
  kStatus = 7,
  kReply = 8,
  kExited = 9,
  kFlush = 10,  // write what the plugins' buffers hold now (no payload)
  kControl = 11,  // change what a live session records (Control)
};

struct Frame {
  MsgType type = MsgType::kHello;
  std::string payload;
};

// The agent introduces itself.
struct Hello {
  uint32_t version = kProtocolVersion;
  int32_t pid = 0;          // as the agent sees it (its pid namespace)
  uint32_t isa = 0;         // ftjit::Isa
  uint8_t attached = 0;     // a session is running
  int32_t owner_pid = 0;    // the CLI that attached it (0: none)
};

// A plugin as the CLI resolved it: the shared object's path (valid in the
// target), its options, its own report format ("" the Attach's) and
// whether an fd of its own for the report came with the message.
struct PluginRequest {
  std::string path;
  std::vector<std::pair<std::string, std::string>> options;
  std::string format;
  uint8_t output_fd = 0;
};

// The most fds one message carries: the session's report file and one per
// plugin that has its own.
inline constexpr size_t kMaxPassedFds = 64;

// A module's compile-unit producers, as the CLI read them before it was
// asked (GenerateKind::kProducers).
struct ModuleProducers {
  ModuleFile file;
  std::vector<CompileUnitProducer> units;
};

struct Attach {
  std::vector<PluginRequest> plugins;
  std::vector<std::string> include, exclude;
  int32_t strategy = 0;  // ftjit_strategy
  std::string format;
  std::vector<int32_t> tids;
  std::string thread_glob;
  uint8_t main_thread = 0;
  // An fd for the report came with this message: the first passed, the
  // plugins' own (PluginRequest::output_fd) after it, in their order.
  uint8_t output_fd = 0;
  int32_t owner_pid = 0;  // the CLI process (shown by status)
  int32_t saves = 0;      // ftjit_saves
  // The plugins' event buffers (plugins::SessionConfig): policy (drop,
  // overwrite, block), bytes per thread (0: the plugin's default), and
  // block's bound on a wait without progress.
  uint8_t buffer_policy = 0;
  uint64_t buffer_bytes = 0;
  uint32_t buffer_wait_ms = 1000;
  // Functions without a sled that the filter selects are traced through
  // relocated entries (FTJIT_OPS_F_RELOCATE).
  uint8_t relocate = 0;
  // Arguments and return values to capture (--args, --retval, --when).
  ArgCaptureSpec args;
  // Which calls are recorded (--depth, --min-duration, --sample, triggers).
  RecordControl record;
  // Keep the record gate for live control (ftjit control) whatever is
  // recorded now (--live).
  uint8_t live = 0;
  // The producers of the modules with records, read by the CLI while it
  // injected the agent: the agent's scan would ask for each, a round trip
  // on the critical path of the attach. One the CLI did not read (or
  // read of another file than the process's) is asked as before.
  std::vector<ModuleProducers> producers;
};

// `ftjit control`: each has_* field set changes that setting of the
// session (plugins::TraceSession::Control); flush writes the buffers out
// after the changes.
struct Control {
  uint8_t has_paused = 0, paused = 0;
  uint8_t has_depth = 0;
  uint32_t depth = 0;
  uint8_t has_sample = 0;
  uint32_t sample = 0;
  uint8_t has_min_duration = 0;
  uint64_t min_duration_ns = 0;
  uint8_t has_filter = 0;
  std::vector<std::string> include, exclude;
  uint8_t flush = 0;
};

struct Detach {
  uint8_t report = 1;   // have the plugins write their reports
  uint8_t unload = 0;   // after detaching, make the agent unloadable
};

struct StatusQuery {
  uint8_t sites = 1;  // list every site with ops
};

// What the agent asks the generator for.
enum class GenerateKind : uint8_t {
  kTrampoline = 0,      // `trampoline`, to run at `place`
  kExitTrampoline = 1,  // `exit`, to run at `place`
  kSiteCode = 2,        // the instructions of the site at `entry` with its
                        // stub at `place` (backend.h, SiteCode): the bytes
                        // are init, call, then the stub's code
  kInlineTemplate = 3,  // the code of every inline trampoline of
                        // `inline_request` (backend.h, InlineRequest)
  kRelocatedEntry = 4,  // the function at `relocation.entry`, relocated
                        // to run at relocation.place (backend.h,
                        // RelocationRequest): bytes are a RelocatedEntry
  kProducers = 5,       // the compile-unit producers of `module`'s file
                        // (core/dwarf_producers.h), if the file the
                        // generator finds there has its size and
                        // fingerprint: bytes are encode_producers'
};

struct Generate {
  GenerateKind kind = GenerateKind::kTrampoline;
  TrampolineRequest trampoline;
  ExitTrampolineRequest exit;
  uint64_t place = 0;
  uint64_t entry = 0;
  InlineRequest inline_request;
  RelocationRequest relocation;
  ModuleFile module;
};

struct Generated {
  int32_t code = 0;  // ftjit_status; 0: bytes hold the code
  std::string message;
  std::string bytes;
};

// The agent's answer to Attach, Status and Detach; also Exited.
struct Reply {
  int32_t code = 0;     // ftjit_status
  std::string message;  // one line: what was done, or why not
  std::string text;     // status lines, or the report
  uint64_t sites = 0;
  uint64_t recursion_drops = 0;
  uint64_t events_dropped = 0;
  // The buffers' other figures (plugins::TraceSession::Totals).
  uint64_t events_overwritten = 0;
  uint64_t buffer_waits = 0;
  uint64_t buffer_wait_ns = 0;
  uint64_t buffer_timeouts = 0;
  std::string writer;  // how the writer worked: "stream", "spool", "recorder"
  // Where an attach's time went inside the agent, in order: ("module
  // scan", microseconds)... `ftjit attach -v` prints them.
  std::vector<std::pair<std::string, uint64_t>> phases;
  // Lines the CLI shows as warnings (stderr), whatever its verbosity.
  std::vector<std::string> warnings;
};

// Encoders: the payload of one message.
std::string encode(const Hello& m);
std::string encode(const Attach& m);
std::string encode(const Detach& m);
std::string encode(const StatusQuery& m);
std::string encode(const Control& m);
std::string encode(const Generate& m);
std::string encode(const Generated& m);
std::string encode(const Reply& m);

// Decoders: refuse anything malformed with FTJIT_E_INVALID_ARGUMENT.
Result<Hello> decode_hello(std::string_view payload);
Result<Attach> decode_attach(std::string_view payload);
Result<Detach> decode_detach(std::string_view payload);
Result<StatusQuery> decode_status(std::string_view payload);
Result<Control> decode_control(std::string_view payload);
Result<Generate> decode_generate(std::string_view payload);
Result<Generated> decode_generated(std::string_view payload);
// SiteCode as Generated::bytes carry it (GenerateKind::kSiteCode).
std::string encode_site_code(const SiteCode& code);
Result<SiteCode> decode_site_code(std::string_view bytes);
// RelocatedEntry as Generated::bytes carry it (GenerateKind::kRelocatedEntry).
std::string encode_relocated_entry(const RelocatedEntry& entry);
Result<RelocatedEntry> decode_relocated_entry(std::string_view bytes);
// Producers as Generated::bytes carry them (GenerateKind::kProducers):
// each distinct unit once, with how many units share it.
std::string encode_producers(const std::vector<CompileUnitProducer>& units);
Result<std::vector<CompileUnitProducer>> decode_producers(std::string_view bytes);
Result<Reply> decode_reply(std::string_view payload);

// Splits the first frame off `buffer`: the frame and the bytes it used, or
// 0 bytes used if the buffer holds only part of it. Errors on a length out
// of range or an unknown type.
struct Split {
  Frame frame;
  size_t used = 0;
};
Result<Split> split_frame(std::string_view buffer);
std::string frame_bytes(MsgType type, std::string_view payload);

// Socket I/O. Sends never raise SIGPIPE (a CLI gone must not kill the
// traced process). `timeout_ms` < 0 waits forever.
ftjit::Status send_frame(int fd, MsgType type, std::string_view payload, int pass_fd = -1);
// The same, passing `pass_fds` (at most kMaxPassedFds) with the frame.
ftjit::Status send_frame_fds(int fd, MsgType type, std::string_view payload, const std::vector<int>& pass_fds);
// Receives one frame; `*received_fd` (if given) gets an fd passed with it,
// or -1. Fails on EOF ("connection closed"), timeout, or a bad frame.
// `max_len` bounds what the peer may make us allocate (the agent takes
// requests, which are small, with kMaxRequest).
Result<Frame> recv_frame(int fd, int timeout_ms, int* received_fd = nullptr,
                         uint32_t max_len = kMaxFrame);
// The same, every fd passed with the frame (at most kMaxPassedFds, in the
// order sent) going to `*received_fds`, whose caller closes them; none on
// failure.
Result<Frame> recv_frame_fds(int fd, int timeout_ms, std::vector<int>* received_fds, uint32_t max_len);

// Where the agent of process `pid` (as it sees itself) listens, relative to
// the target's root: /tmp/ftjit-UID/PID.sock, in a 0700 directory.
std::string socket_dir(uid_t uid);
std::string socket_path(uid_t uid, int32_t pid);
// Removes a socket file of socket_dir(uid) and then the directory, if that
// left it empty: the last agent of a user leaves nothing in /tmp. rmdir
// takes only an empty directory, so an agent that has just bound its
// socket keeps it; one that made the directory and has not bound yet
// finds it gone and makes it again (ControlServer::start).
void remove_socket(uid_t uid, const std::string& path);

}  // namespace ftjit::control

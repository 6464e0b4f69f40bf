// SPDX-License-Identifier: MIT
#include "runtime/agent/remote_emitter.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "runtime/control/protocol.h"

namespace ftjit::agent {
namespace {
// Emitting one trampoline takes microseconds; a CLI that takes this long
// is stopped or gone, and the attach it serves fails cleanly.
constexpr int kGenerateTimeoutMs = 10000;
}  // namespace

void RemoteEmitter::add_generator(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  fds_.push_back(fd);
}

void RemoteEmitter::remove_generator(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(fds_.begin(), fds_.end(), fd);
  if (it == fds_.end()) return;
  fds_.erase(it);
  ::close(fd);
}

void RemoteEmitter::close_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : fds_) ::close(fd);
  fds_.clear();
}

bool RemoteEmitter::is_generator(int fd) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::find(fds_.begin(), fds_.end(), fd) != fds_.end();
}

Result<std::vector<uint8_t>> RemoteEmitter::ask(const std::string& payload) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto started = std::chrono::steady_clock::now();
  struct Account {
    const RemoteEmitter* self;
    std::chrono::steady_clock::time_point started;
    ~Account() {
      self->round_trips_.fetch_add(1, std::memory_order_relaxed);
      self->round_trip_micros_.fetch_add(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started)
              .count(),
          std::memory_order_relaxed);
    }
  } account{this, started};
  while (!fds_.empty()) {
    int fd = fds_.back();
    auto sent = control::send_frame(fd, control::MsgType::kGenerate, payload);
    auto frame = sent ? control::recv_frame(fd, kGenerateTimeoutMs, nullptr, control::kMaxRequest)
                      : Result<control::Frame>(sent.take_error());
    if (frame && frame->type == control::MsgType::kGenerated) {
      auto g = control::decode_generated(frame->payload);
      if (!g) return g.take_error();
      if (g->code != 0) {
        return make_error(static_cast<ftjit_status>(g->code), "code generator: " + g->message);
      }
      return std::vector<uint8_t>(g->bytes.begin(), g->bytes.end());
    }
    // Gone, silent or confused: never ask it again.
    fds_.pop_back();
    ::close(fd);
  }
  return make_error(FTJIT_E_UNSUPPORTED,
                    "no code generator: the ftjit CLI that attached is not connected");
}

Result<std::vector<uint8_t>> RemoteEmitter::emit_trampoline(const TrampolineRequest& request,
                                                            uint64_t place) const {
  control::Generate g;
  g.trampoline = request;
  g.place = place;
  return ask(control::encode(g));
}

Result<std::vector<uint8_t>> RemoteEmitter::emit_exit_trampoline(
    const ExitTrampolineRequest& request, uint64_t place) const {
  control::Generate g;
  g.kind = control::GenerateKind::kExitTrampoline;
  g.exit = request;
  g.place = place;
  return ask(control::encode(g));
}

Result<SiteCode> RemoteEmitter::emit_site_code(uint64_t entry, uint64_t stub) const {
  control::Generate g;
  g.kind = control::GenerateKind::kSiteCode;
  g.entry = entry;
  g.place = stub;
  auto bytes = ask(control::encode(g));
  if (!bytes) return bytes.take_error();
  return control::decode_site_code(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
}

Result<std::vector<uint8_t>> RemoteEmitter::emit_inline_template(const InlineRequest& request) const {
  control::Generate g;
  g.kind = control::GenerateKind::kInlineTemplate;
  g.inline_request = request;
  return ask(control::encode(g));
}

Result<RelocatedEntry> RemoteEmitter::relocate_entry(const RelocationRequest& request) const {
  control::Generate g;
  g.kind = control::GenerateKind::kRelocatedEntry;
  g.relocation = request;
  auto bytes = ask(control::encode(g));
  if (!bytes) {
    // A refusal reads as the generator's reason, not as its failure.
    Error e = bytes.take_error();
    constexpr std::string_view kPrefix = "code generator: ";
    if ((e.code == FTJIT_E_NOT_PATCHABLE || e.code == FTJIT_E_OUT_OF_RANGE) && e.message.starts_with(kPrefix))
      e.message.erase(0, kPrefix.size());
    return e;
  }
  return control::decode_relocated_entry(
      std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
}

void RemoteEmitter::prime_producers(const ModuleFile& file, std::vector<CompileUnitProducer> units) {
  std::lock_guard<std::mutex> lock(producers_mu_);
  producers_.insert_or_assign(std::make_tuple(file.path, file.size, file.fingerprint), std::move(units));
}

Result<std::vector<CompileUnitProducer>> RemoteEmitter::module_producers(const ModuleFile& file) const {
  const auto key = std::make_tuple(file.path, file.size, file.fingerprint);
  {
    std::lock_guard<std::mutex> lock(producers_mu_);
    if (auto it = producers_.find(key); it != producers_.end()) return it->second;
  }
  control::Generate g;
  g.kind = control::GenerateKind::kProducers;
  g.module = file;
  auto bytes = ask(control::encode(g));
  if (!bytes) return bytes.take_error();
  auto units = control::decode_producers(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  if (units) {
    std::lock_guard<std::mutex> lock(producers_mu_);
    producers_.emplace(key, *units);
  }
  return units;
}

}  // namespace ftjit::agent

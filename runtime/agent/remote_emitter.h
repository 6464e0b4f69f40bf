// SPDX-License-Identifier: MIT
// The agent's code generator is the CLI: each trampoline request (target
// addresses, plain data) goes over a "generator" connection and the bytes
// come back. The agent itself links neither asmjit nor LLVM.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "core/dwarf_producers.h"
#include "core/module_file.h"

namespace ftjit::agent {

class RemoteEmitter final : public TrampolineEmitter, public EntryRelocator {
 public:
  // A connection whose peer answers Generate frames from now on; the
  // newest is asked first. The emitter owns the fd.
  void add_generator(int fd);
  // Forgets (and closes) `fd` if it is a generator.
  void remove_generator(int fd);
  bool is_generator(int fd) const;
  // Closes every generator connection (the agent is being unloaded).
  void close_all();

  Result<std::vector<uint8_t>> emit_trampoline(const TrampolineRequest& request,
                                               uint64_t place) const override;
  Result<std::vector<uint8_t>> emit_exit_trampoline(const ExitTrampolineRequest& request,
                                                    uint64_t place) const override;
  Result<SiteCode> emit_site_code(uint64_t entry, uint64_t stub) const override;
  Result<std::vector<uint8_t>> emit_inline_template(const InlineRequest& request) const override;
  // The generator reads the module's file (through the process's root)
  // and proves and copies the entry there.
  Result<RelocatedEntry> relocate_entry(const RelocationRequest& request) const override;
  // The generator reads the module's DWARF (it has libdw; the process
  // reads none): its compile-unit producers, if the file it finds is the
  // process's (runtime/module_scan.h, ProducerReader). Each file's answer
  // is asked once: a module is scanned again at every attach and
  // dlopen refresh, and each question is a round trip to the CLI (a few
  // ms on a busy machine: both sides wait for a CPU).
  Result<std::vector<CompileUnitProducer>> module_producers(const ModuleFile& file) const;
  // What the CLI sent ahead with its attach request (control::Attach::
  // producers): answered from here when asked, without a round trip.
  void prime_producers(const ModuleFile& file, std::vector<CompileUnitProducer> units);

  // Round trips to the CLI so far, and the microseconds they took (an
  // attach's "where the time went" subtracts two readings).
  uint64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  uint64_t round_trip_micros() const { return round_trip_micros_.load(std::memory_order_relaxed); }

 private:
  Result<std::vector<uint8_t>> ask(const std::string& payload) const;

  mutable std::mutex mu_;
  mutable std::vector<int> fds_;  // oldest first
  mutable std::atomic<uint64_t> round_trips_{0};
  mutable std::atomic<uint64_t> round_trip_micros_{0};
  // module_producers' answers by (path, size, fingerprint): the identity
  // the generator checks before it reads the file.
  mutable std::mutex producers_mu_;
  mutable std::map<std::tuple<std::string, uint64_t, uint64_t>, std::vector<CompileUnitProducer>> producers_;
};

}  // namespace ftjit::agent

// SPDX-License-Identifier: MIT
// The agent's code generator is the CLI: each trampoline request (target
// addresses, plain data) goes over a "generator" connection and the bytes
// come back. The agent itself links neither asmjit nor LLVM.
#pragma once

#include <mutex>
#include <vector>

#include "backends/backend.h"

namespace ftjit::agent {

class RemoteEmitter final : public TrampolineEmitter {
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

 private:
  Result<std::vector<uint8_t>> ask(const std::string& payload) const;

  mutable std::mutex mu_;
  mutable std::vector<int> fds_;  // oldest first
};

}  // namespace ftjit::agent

// SPDX-License-Identifier: MIT
#include "runtime/agent/generator_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "backends/backend.h"

extern char** environ;

namespace ftjit::agent {
namespace {

constexpr int kGeneratorFd = 3;

Result<RemoteEmitter*> start_generator() {
  const char* path = std::getenv("FTJIT_GENERATOR");
  if (path == nullptr || *path == '\0') {
    return make_error(FTJIT_E_UNSUPPORTED,
                      std::string("this ftjit has no code generator or instruction decoder for ") +
                          isa_name(native_isa()) +
                          ": set FTJIT_GENERATOR to an ftjit that has them (on a qemu-user guest, the "
                          "host's ftjit), which is started as its code generator");
  }
  if (::access(path, X_OK) != 0) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, std::string("FTJIT_GENERATOR=") + path + ": " + std::strerror(errno));
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return make_error(FTJIT_E_SYSTEM, std::string("socketpair: ") + std::strerror(errno));
  }
  // The generator's end becomes its fd 3, without CLOEXEC; ours stays ours.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], kGeneratorFd);
  const std::string isa = isa_name(native_isa());
  const std::string fd = std::to_string(kGeneratorFd);
  char* const argv[] = {const_cast<char*>(path), const_cast<char*>("generator"), const_cast<char*>("--isa"),
                        const_cast<char*>(isa.c_str()), const_cast<char*>("--fd"), const_cast<char*>(fd.c_str()),
                        nullptr};
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, path, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(sv[1]);
  if (err != 0) {
    ::close(sv[0]);
    return make_error(FTJIT_E_SYSTEM, std::string("cannot start ") + path + ": " + std::strerror(err));
  }
  auto* emitter = new RemoteEmitter();  // for the life of the process: engines keep it
  emitter->add_generator(sv[0]);
  return emitter;
}

class LazyGeneratorRelocator final : public EntryRelocator {
 public:
  Result<RelocatedEntry> relocate_entry(const RelocationRequest& request) const override {
    auto generator = process_generator();
    if (!generator) return generator.take_error();
    return (*generator)->relocate_entry(request);
  }
};

}  // namespace

Result<RemoteEmitter*> process_generator() {
  static std::mutex mu;
  static RemoteEmitter* generator = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mu);
  if (generator != nullptr) return generator;
  if (!failure.empty()) return make_error(FTJIT_E_UNSUPPORTED, failure);
  auto g = start_generator();
  if (!g) {
    failure = g.error().message;
    return g.take_error();
  }
  generator = *g;
  return generator;
}

Result<std::vector<CompileUnitProducer>> generator_module_producers(const ModuleFile& file, const std::string&) {
  auto generator = process_generator();
  if (!generator) return generator.take_error();
  return (*generator)->module_producers(file);
}

const EntryRelocator* generator_entry_relocator() {
  static const LazyGeneratorRelocator relocator;
  return &relocator;
}

}  // namespace ftjit::agent

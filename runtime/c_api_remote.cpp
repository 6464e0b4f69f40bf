// SPDX-License-Identifier: MIT
// ftjit_engine_create in a build that has no code generator for its own
// ISA (the riscv64 build: Debian has neither asmjit nor LLVM for riscv64).
// Another ftjit generates its code: the one named by FTJIT_GENERATOR, an
// ftjit of any ISA whose build has this ISA's emitter (the x86-64 host's,
// when the process runs under qemu-riscv64), started once per process as
//
//     $FTJIT_GENERATOR generator --isa <this ISA> --fd 3
//
// on one end of a socket pair; its requests and bytes are the agent's
// (runtime/agent/remote_emitter.h). The generator ends when the process
// does (its end of the socket closes).
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "backends/backend.h"
#include "ftjit/ftjit.h"
#include "runtime/agent/remote_emitter.h"
#include "runtime/c_api_internal.h"

extern char** environ;

namespace ftjit {
namespace {

constexpr int kGeneratorFd = 3;

struct RemoteGenerator {
  agent::RemoteEmitter emitter;
  std::unique_ptr<Backend> backend;
};

Result<RemoteGenerator*> start_generator() {
  const char* path = std::getenv("FTJIT_GENERATOR");
  if (path == nullptr || *path == '\0') {
    return make_error(FTJIT_E_UNSUPPORTED,
                      std::string("this ftjit has no code generator for ") + isa_name(native_isa()) +
                          ": set FTJIT_GENERATOR to an ftjit that has one (on a qemu-user guest, the "
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
  auto* g = new RemoteGenerator();  // for the life of the process: engines keep its backend
  g->emitter.add_generator(sv[0]);
  g->backend = make_backend(native_isa(), g->emitter);
  if (g->backend == nullptr) {
    return make_error(FTJIT_E_UNSUPPORTED, std::string("ftjit was built without the ") + isa_name(native_isa()) +
                                               " backend");
  }
  return g;
}

}  // namespace
}  // namespace ftjit

extern "C" ftjit_engine* ftjit_engine_create(const ftjit_engine_options* opts) {
  static std::mutex mu;
  static ftjit::RemoteGenerator* generator = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (generator == nullptr) {
    auto g = ftjit::start_generator();
    if (!g) {
      ftjit::c_api_fail(g.error());
      return nullptr;
    }
    generator = *g;
  }
  return ftjit::create_engine_handle(opts, *generator->backend, &generator->emitter);
}

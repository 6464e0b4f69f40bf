// SPDX-License-Identifier: MIT
#include "cli/guest_program.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "backends/backend.h"
#include "cli/inject/injector_isa.h"

namespace ftjit::cli {
namespace {

// What qemu-user and Debian call each guest ISA.
struct GuestIsa {
  Isa isa;
  uint16_t e_machine;
  const char* qemu;     // the emulator
  const char* triple;   // Debian's cross sysroot: /usr/<triple>
  const char* loader;   // the dynamic loader, in <sysroot>/lib
  const char* libc_package;
};
constexpr GuestIsa kGuests[] = {
    {Isa::kX86_64, EM_X86_64, "qemu-x86_64", "x86_64-linux-gnu", "ld-linux-x86-64.so.2",
     "libc6-amd64-cross"},
    {Isa::kArm64, EM_AARCH64, "qemu-aarch64", "aarch64-linux-gnu", "ld-linux-aarch64.so.1",
     "libc6-arm64-cross"},
    {Isa::kRiscv64, EM_RISCV, "qemu-riscv64", "riscv64-linux-gnu", "ld-linux-riscv64-lp64d.so.1",
     "libc6-riscv64-cross"},
};

const GuestIsa* guest_of(Isa isa) {
  for (const GuestIsa& g : kGuests) {
    if (g.isa == isa) return &g;
  }
  return nullptr;
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// execvp's lookup: a name without '/' is searched in PATH.
std::string resolve_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t at = 0;
  for (;;) {
    const size_t colon = rest.find(':', at);
    std::string dir = rest.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    if (dir.empty()) dir = ".";
    if (std::string candidate = dir + "/" + name; is_executable_file(candidate)) return candidate;
    if (colon == std::string::npos) return "";
    at = colon + 1;
  }
}

}  // namespace

// The ISA ftjit is built for: its injector's (cli/inject/<isa>/).
Isa host_isa() { return inject::detail::injector_isa().isa; }

Result<ProgramFile> inspect_program(const std::string& prog) {
  ProgramFile out;
  out.path = resolve_in_path(prog);
  if (out.path.empty()) return make_error(FTJIT_E_INVALID_ARGUMENT, "cannot run " + prog + ": not found in PATH");
  const int fd = ::open(out.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "cannot run " + out.path + ": " + std::strerror(errno));
  }
  Elf64_Ehdr eh{};
  const bool whole = ::pread(fd, &eh, sizeof eh, 0) == static_cast<ssize_t>(sizeof eh);
  ::close(fd);
  if (!whole || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return out;  // a script: native
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) return out;
  out.e_machine = eh.e_machine;
  for (const GuestIsa& g : kGuests) {
    if (g.e_machine == eh.e_machine) out.isa = g.isa;
  }
  return out;
}

Result<std::string> find_guest_file(Isa isa, const std::string& env_prefix, const std::string& name,
                                    int access_mode, const std::string& kind,
                                    const std::string& missing_hint) {
  std::string upper = isa_name(isa);
  for (char& c : upper) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::string var = env_prefix + "_" + upper;
  std::string path;
  if (const char* env = std::getenv(var.c_str()); env != nullptr && *env != '\0') {
    path = env;
    if (::access(env, access_mode) != 0) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, var + "=" + path + ": " + std::strerror(errno));
    }
  } else {
    char exe[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      exe[n] = '\0';
      std::string dir(exe);
      dir.resize(dir.rfind('/'));
      for (const std::string& lib : {std::string("lib"), std::string(FTJIT_AGENT_RELATIVE_DIR)}) {
        const std::string candidate = dir + "/../" + lib + "/ftjit/" + isa_name(isa) + "/" + name;
        char real[PATH_MAX];
        if (::realpath(candidate.c_str(), real) != nullptr && ::access(real, access_mode) == 0) {
          path = real;
          break;
        }
      }
    }
    if (path.empty()) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, std::string("no ") + isa_name(isa) + " " + name +
                                                      " beside ftjit (../lib/ftjit/" + isa_name(isa) +
                                                      "/): " + missing_hint + ", or set " + var);
    }
  }
  // One of the wrong ISA would only fail inside the guest (or run natively).
  auto file = inspect_program(path);
  if (!file) return file.take_error();
  if (file->isa != isa) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      path + " is not an " + isa_name(isa) + " " + kind + " (" + var + ")");
  }
  return file->path;
}

Status check_guest_isa(Isa isa, const std::string& argv0) {
  if (guest_of(isa) == nullptr || emitter_for(isa) == nullptr) {
    return make_error(FTJIT_E_UNSUPPORTED, argv0 + " is a " + isa_name(isa) + " program, and this ftjit has no " +
                                               isa_name(isa) + " backend to generate its trampolines");
  }
  return {};
}

Result<std::vector<std::string>> guest_command(Isa isa, const std::string& sysroot_option,
                                               const std::string& agent,
                                               const std::vector<std::string>& env,
                                               const std::vector<std::string>& argv) {
  FTJIT_TRY(check_guest_isa(isa, argv[0]));
  const GuestIsa* g = guest_of(isa);
  const std::string qemu = resolve_in_path(g->qemu);
  if (qemu.empty()) {
    return make_error(FTJIT_E_UNSUPPORTED, argv[0] + " is a " + isa_name(isa) + " program: running it needs " +
                                               g->qemu + ", which is not in PATH (apt-get install qemu-user)");
  }
  const std::string sysroot = sysroot_option.empty() ? std::string("/usr/") + g->triple : sysroot_option;
  const std::string loader = sysroot + "/lib/" + g->loader;
  if (::access(loader.c_str(), R_OK) != 0) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "sysroot " + sysroot + " has no " + isa_name(isa) + " loader (" + loader + "): " +
                          (sysroot_option.empty() ? std::string("apt-get install ") + g->libc_package +
                                                        ", or give --sysroot DIR"
                                                  : std::string("give --sysroot the root of an ") +
                                                        isa_name(isa) + " system"));
  }
  std::vector<std::string> cmd{qemu, "-L", sysroot};
  // The sysroot's libc before the multiarch one: the loader of one glibc
  // build with the libc of another misreads their shared state.
  cmd.insert(cmd.end(), {"-E", "LD_LIBRARY_PATH=" + sysroot + "/lib"});
  // No agent (ftjit bench --isa: the bench links the engine itself): no preload.
  if (!agent.empty()) cmd.insert(cmd.end(), {"-E", "LD_PRELOAD=" + agent});
  for (const std::string& e : env) cmd.insert(cmd.end(), {"-E", e});
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return cmd;
}

}  // namespace ftjit::cli

// SPDX-License-Identifier: MIT
// `ftjit bench [ARGS...]`: runs ftjit-bench (the measurements of the
// README: dispatch strategies, exit hooks, plugins, attach time, sizes)
// with the given arguments.
//
// `ftjit bench --isa arm64 [--sysroot DIR] [ARGS...]` runs the arm64 build
// of ftjit-bench under qemu-user instead (guest_program.h):
//
//   qemu-aarch64 -L SYSROOT -E LD_LIBRARY_PATH=SYSROOT/lib -0 'ftjit bench'
//                BENCH ARGS
//
// SYSROOT: --sysroot, else /usr/aarch64-linux-gnu. BENCH: $FTJIT_BENCH_ARM64,
// else ../lib/ftjit/arm64/ftjit-bench beside this executable (a cross build
// with -DFTJIT_CROSS_LEG=ON -DFTJIT_BENCH_IN_CROSS_LEG=ON makes one). The
// figures are emulated: nanoseconds of qemu's translated code, which say
// nothing about an arm64 CPU; the shape (what grows with what) is what
// such a run is for.
#include <limits.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/guest_program.h"

namespace ftjit::cli {

namespace {

// Next to this executable first (an install puts both in bin/), then where
// the build put it.
std::string bench_binary() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir.resize(dir.rfind('/') + 1);
    std::string beside = dir + "ftjit-bench";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
#ifdef FTJIT_BENCH_BINARY
  if (access(FTJIT_BENCH_BINARY, X_OK) == 0) return FTJIT_BENCH_BINARY;
#endif
  return "";
}

// Its name in usage lines and refusals is the command the user typed.
constexpr const char* kProgramName = "ftjit bench";

int fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgramName, message.c_str());
  return 1;
}

int run_bench(const std::vector<std::string>& args) {
  const std::string bin = bench_binary();
  if (bin.empty()) {
    std::fprintf(stderr, "ftjit bench: ftjit-bench not found (built with -DFTJIT_BENCH=OFF?)\n");
    return 1;
  }
  std::vector<char*> argv;
  static char program_name[] = "ftjit bench";
  argv.push_back(program_name);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(bin.c_str(), argv.data());
  std::fprintf(stderr, "ftjit bench: cannot run %s: %s\n", bin.c_str(), std::strerror(errno));
  return 1;
}

// ---------------------------------------------------------------------------
// --isa: another ISA's ftjit-bench under qemu-user
// ---------------------------------------------------------------------------

// "arm64" -> Isa::kArm64 (also "x86_64" for x86-64's "x86-64").
Isa parse_isa(std::string name) {
  for (char& c : name) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (Isa isa : {Isa::kX86_64, Isa::kArm64, Isa::kRiscv64}) {
    if (name == isa_name(isa)) return isa;
  }
  return Isa::kUnknown;
}

int run_guest_bench(Isa isa, const std::string& sysroot, const std::vector<std::string>& args) {
  if (auto st = check_guest_isa(isa, std::string(isa_name(isa)) + " ftjit-bench"); !st) {
    return fail(st.error().message);
  }
  auto bench = find_guest_file(isa, "FTJIT_BENCH", "ftjit-bench", X_OK, "program",
                               "cross-build it (-DFTJIT_CROSS_LEG=ON -DFTJIT_BENCH_IN_CROSS_LEG=ON, "
                               "target ftjit-bench)");
  if (!bench) return fail(bench.error().message);
  std::vector<std::string> argv{*bench};
  argv.insert(argv.end(), args.begin(), args.end());
  // No agent: the bench links the engine itself. It generates its own
  // trampolines inside the guest where its build has a code generator
  // (arm64: asmjit); a riscv64 bench has none (no riscv64 LLVM) and starts
  // this ftjit as its generator (runtime/c_api_remote.cpp).
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return fail(std::string("cannot find this ftjit (/proc/self/exe): ") + std::strerror(errno));
  self[n] = '\0';
  auto cmd = guest_command(isa, sysroot, "", {std::string("FTJIT_GENERATOR=") + self}, argv);
  if (!cmd) return fail(cmd.error().message);
  // The guest's argv[0] is the command the user typed, as natively.
  cmd->insert(cmd->end() - static_cast<std::ptrdiff_t>(argv.size()), {"-0", kProgramName});

  // Before the table (stdout), or on stderr when stdout is one JSON object.
  bool json = false;
  for (const std::string& a : args) json = json || a == "--json";
  std::fprintf(json ? stderr : stdout,
               "ftjit bench --isa %s: figures are emulated (qemu-user, %s on this %s machine): "
               "only their shape means anything, not their nanoseconds\n",
               isa_name(isa), cmd->front().c_str(), isa_name(host_isa()));
  std::fflush(stdout);
  std::fflush(stderr);

  std::vector<char*> exec_argv;
  for (auto& a : *cmd) exec_argv.push_back(a.data());
  exec_argv.push_back(nullptr);
  execv(exec_argv[0], exec_argv.data());
  return fail("cannot run " + cmd->front() + ": " + std::strerror(errno));
}

// Takes `--isa ISA` and `--sysroot DIR` (or --isa=ISA, --sysroot=DIR) off
// the front of args; everything from the first other argument on is
// ftjit-bench's.
int run_bench_command(std::vector<std::string> args) {
  std::string isa_text;
  std::string sysroot;
  bool have_isa = false;
  bool have_sysroot = false;
  size_t at = 0;
  while (at < args.size()) {
    const std::string& a = args[at];
    std::string* value = nullptr;
    std::string name;
    if (a == "--isa" || a.rfind("--isa=", 0) == 0) {
      value = &isa_text;
      name = "--isa";
      have_isa = true;
    } else if (a == "--sysroot" || a.rfind("--sysroot=", 0) == 0) {
      value = &sysroot;
      name = "--sysroot";
      have_sysroot = true;
    } else {
      break;
    }
    if (a.size() > name.size()) {
      *value = a.substr(name.size() + 1);
      at += 1;
    } else if (at + 1 < args.size()) {
      *value = args[at + 1];
      at += 2;
    } else {
      return fail(name + " needs a value (e.g. " + (name == "--isa" ? "--isa arm64" : "--sysroot /usr/aarch64-linux-gnu") + ")");
    }
  }
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(at));
  if (!have_isa) {
    if (have_sysroot) return fail("--sysroot is for --isa (a bench of another ISA, run under qemu-user)");
    return run_bench(args);
  }
  const Isa isa = parse_isa(isa_text);
  if (isa == Isa::kUnknown) return fail("--isa " + isa_text + ": unknown ISA (arm64, riscv64, or x86-64)");
  if (isa == host_isa()) {
    if (have_sysroot) return fail("--sysroot is for another ISA's bench; " + isa_text + " runs natively");
    return run_bench(args);
  }
  return run_guest_bench(isa, sysroot, args);
}

}  // namespace

void add_bench_command(CLI::App& app, std::function<int()>* run) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure what tracing costs here (ftjit-bench; 'ftjit bench --help' for its options; "
      "'ftjit bench --isa arm64|riscv64 [--sysroot DIR] ...' runs that ISA's bench under qemu-user)");
  cmd->prefix_command();  // everything after `bench` is ftjit-bench's
  cmd->set_help_flag();
  cmd->callback([run, cmd] {
    std::vector<std::string> args = cmd->remaining();
    *run = [args] { return run_bench_command(args); };
  });
}

}  // namespace ftjit::cli

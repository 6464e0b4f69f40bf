// SPDX-License-Identifier: MIT
// `ftjit generator --isa ISA --fd N`: this host's code generator for a
// process that has none (a riscv64 process under qemu-riscv64: Debian has
// no riscv64 LLVM), on a connected socket the process made and passed to
// us: each Generate frame gets its Generated answer, until the process
// closes its end. `ftjit run` and `ftjit attach` serve their agents this
// way over the agent's own connection; this command is for code that
// embeds the engine and starts the generator itself (the riscv64 tests).
#include <cstdio>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "cli/agent_client.h"
#include "cli/commands.h"
#include "cli/option_values.h"
#include "runtime/control/protocol.h"

namespace ftjit::cli {
namespace {

struct GeneratorOptions {
  std::string isa;
  int fd = -1;
};

int run_generator(const GeneratorOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit generator: %s\n", message.c_str());
    return 1;
  };
  const TrampolineEmitter* emitter = nullptr;
  for (Isa isa : {Isa::kX86_64, Isa::kArm64, Isa::kRiscv64}) {
    if (o.isa == isa_name(isa)) emitter = emitter_for(isa);
  }
  if (emitter == nullptr) return fail("no code generator for ISA '" + o.isa + "' in this ftjit");
  for (;;) {
    auto frame = control::recv_frame(o.fd, -1, nullptr, control::kMaxRequest);
    if (!frame) return 0;  // the process closed its end: done
    if (frame->type != control::MsgType::kGenerate) return fail("unexpected message on fd " + std::to_string(o.fd));
    const control::Generated out = answer_generate(frame->payload, *emitter);
    if (!control::send_frame(o.fd, control::MsgType::kGenerated, control::encode(out))) return 0;
  }
}

}  // namespace

void add_generator_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<GeneratorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generator", "Serve trampolines and site code to a process without a code generator, on a socket it passed");
  cmd->add_option("--isa", o->isa, "The process's ISA: x86-64, arm64 or riscv64")->required();
  cmd->add_option("--fd", o->fd, "The connected socket, inherited from the process that started us")
      ->required()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([o, run] { *run = [o] { return run_generator(*o); }; });
}

}  // namespace ftjit::cli

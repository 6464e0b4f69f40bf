// SPDX-License-Identifier: MIT
// libFuzzer target for the agent's control-message decoders: the agent runs
// them inside the traced process on bytes from whoever reached its socket.
// Any input must give a message or an error, never a crash, a leak or a
// huge allocation; and a message that decodes re-encodes to the very same
// bytes (the format is canonical, so nothing ambiguous gets through).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <tuple>

#include <vector>

#include "runtime/control/protocol.h"
#include "runtime/plugin_host/arg_capture.h"

using namespace ftjit::control;

namespace {

// An Attach's argument capture as the agent uses it: compiled into plans,
// run on a made-up frame (its stack a buffer big enough for any stack
// offset read directly), formatted. Pointers come from the input: they are
// read through the kernel, never dereferenced.
void capture(const Attach& a) {
  ftjit::plugins::ArgCapturer capturer(a.args);
  std::vector<uint8_t> stack(1024, 0x5a);
  ftjit_regs regs{};
  for (int i = 0; i < 8; ++i) regs.arg[i] = 0x1000u * (i + 1);
  regs.sp = reinterpret_cast<uint64_t>(stack.data());
  ftjit_ret_regs ret{};
  std::vector<uint8_t> record(capturer.max_record());
  for (const ftjit::CapturedFunction& f : a.args.functions) {
    uint32_t n = capturer.capture_entry(f.ip, &regs, record.data(), static_cast<uint32_t>(record.size()));
    if (n > record.size() && n != ftjit::plugins::kArgsFiltered) std::abort();
    if (n != 0 && n != ftjit::plugins::kArgsFiltered) (void)capturer.text(f.ip, record.data(), n);
    n = capturer.capture_exit(f.ip, &ret, record.data(), static_cast<uint32_t>(record.size()));
    if (n > record.size()) std::abort();
    if (n != 0) (void)capturer.text(f.ip, record.data(), n);
  }
}

// The same units, each as often, in any order.
bool same_units(std::vector<ftjit::CompileUnitProducer> a, std::vector<ftjit::CompileUnitProducer> b) {
  auto key = [](const ftjit::CompileUnitProducer& u) { return std::tie(u.producer, u.version, u.has_code); };
  auto less = [&key](const ftjit::CompileUnitProducer& x, const ftjit::CompileUnitProducer& y) { return key(x) < key(y); };
  std::sort(a.begin(), a.end(), less);
  std::sort(b.begin(), b.end(), less);
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&key](const ftjit::CompileUnitProducer& x, const ftjit::CompileUnitProducer& y) { return key(x) == key(y); });
}

template <typename Decode>
void check(std::string_view payload, Decode decode) {
  auto m = decode(payload);
  if (!m) return;
  if (encode(*m) != payload) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  // The framing, as the socket reader sees a stream.
  while (!all.empty()) {
    auto split = split_frame(all);
    if (!split || split->used == 0) break;
    all.remove_prefix(split->used);
  }
  if (size == 0) return 0;
  std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 9) {
    case 0: check(payload, decode_hello); break;
    case 1:
      check(payload, decode_attach);
      if (auto a = decode_attach(payload)) capture(*a);
      break;
    case 2: check(payload, decode_detach); break;
    case 3: check(payload, decode_status); break;
    case 4: check(payload, decode_generate); break;
    case 5: check(payload, decode_generated); break;
    case 6: check(payload, decode_reply); break;
    case 7:
      // Not canonical: the encoder sends each distinct unit once with its
      // count, wherever its copies stood, so [A, B, A] comes back as
      // [A, A, B]. What must hold: the same units as often (in any order),
      // and the encoding of the result is a fixed point.
      if (auto units = decode_producers(payload)) {
        const std::string bytes = encode_producers(*units);
        auto again = decode_producers(bytes);
        if (!again || !same_units(*units, *again)) std::abort();
        if (encode_producers(*again) != bytes) std::abort();
      }
      break;
    case 8: check(payload, decode_control); break;
  }
  return 0;
}

// SPDX-License-Identifier: MIT
// libFuzzer target for the agent's control-message decoders: the agent runs
// them inside the traced process on bytes from whoever reached its socket.
// Any input must give a message or an error, never a crash, a leak or a
// huge allocation; and a message that decodes re-encodes to the very same
// bytes (the format is canonical, so nothing ambiguous gets through).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/control/protocol.h"

using namespace ftjit::control;

namespace {

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
  switch (data[0] % 7) {
    case 0: check(payload, decode_hello); break;
    case 1: check(payload, decode_attach); break;
    case 2: check(payload, decode_detach); break;
    case 3: check(payload, decode_status); break;
    case 4: check(payload, decode_generate); break;
    case 5: check(payload, decode_generated); break;
    case 6: check(payload, decode_reply); break;
  }
  return 0;
}

// SPDX-License-Identifier: MIT
#include "core/function_selection.h"

#include "core/demangle.h"

namespace ftjit {

std::vector<SelectedFunction> select_functions(const ElfImage& image, const Filter& filter,
                                               std::string_view module_base) {
  std::vector<SelectedFunction> out;
  const auto& fns = image.functions();
  for (size_t i = 0; i < fns.size();) {
    size_t next = i;
    SelectedFunction f;
    for (; next < fns.size() && fns[next].value == fns[i].value; ++next) {
      if (f.named != nullptr) continue;
      std::string d = demangle(fns[next].name);
      if (filter.matches(module_base, fns[next].name, d)) {
        f.named = &fns[next];
        f.demangled = std::move(d);
      }
    }
    f.symbols = std::span<const ElfSymbol>(fns.data() + i, next - i);
    i = next;
    if (f.named != nullptr && f.symbol().in_code_section) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace ftjit

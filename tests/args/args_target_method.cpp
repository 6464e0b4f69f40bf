// SPDX-License-Identifier: MIT
// The --args fixture's C++ part: a method, whose first parameter is the
// artificial `this`.
#include <cstdio>

class Counter {
 public:
#if defined(__clang__)
  __attribute__((noinline, optnone)) int add(int delta) { return total_ += delta; }
#else
  __attribute__((noinline, noipa)) int add(int delta) { return total_ += delta; }
#endif

 private:
  int total_ = 40;
};

extern "C" int args_method_call(FILE *oracle) {
  static Counter counter;
  const int r = counter.add(2);
  std::fprintf(oracle, "Counter::add(this=%p, delta=2) = %d;\n", static_cast<void *>(&counter), r);
  return r;
}

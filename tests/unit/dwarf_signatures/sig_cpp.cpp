// SPDX-License-Identifier: MIT
// C++ shapes for core/dwarf_signatures.h: methods (an artificial `this`),
// references, namespaces, a class passed by invisible reference, an
// unnamed parameter, and a pointer to member function.
#include <cstdint>
#include <string_view>

#define KEEP __attribute__((noinline, used))

namespace sig {

struct Vec2 {
  float x;
  float y;
};

class Counter {
 public:
  KEEP int add(int delta);
  KEEP static int twice(int v);
  KEEP Vec2 scaled(const Vec2& v, float k) const;
  int value = 0;
};

int Counter::add(int delta) { return value += delta; }
int Counter::twice(int v) { return 2 * v; }
Vec2 Counter::scaled(const Vec2& v, float k) const { return {v.x * k + value, v.y * k}; }

// Not trivially copyable: passed by invisible reference whatever its size.
struct Tracked {
  Tracked(const Tracked& other) : id(other.id + 1) {}
  explicit Tracked(int i) : id(i) {}
  ~Tracked() {}
  int id;
};

KEEP int by_ref(int& counter, const Vec2& v, Vec2&& moved) { return counter += int(v.x + moved.y); }
KEEP int tracked_id(Tracked t) { return t.id; }
KEEP int unnamed(int, int b) { return b; }
KEEP bool method_ptr(int (Counter::*m)(int), Counter* c) { return (c->*m)(1) != 0; }
KEEP std::size_t view_size(std::string_view s) { return s.size(); }
KEEP char16_t utf16(char16_t c, wchar_t w) { return char16_t(c + w); }

}  // namespace sig

extern "C" KEEP int sig_cpp_entry(int x) {
  sig::Counter c;
  sig::Tracked t(x);
  int r = x;
  return c.add(x) + sig::Counter::twice(x) + sig::tracked_id(t) + sig::by_ref(r, {1, 2}, {3, 4}) +
         int(c.scaled({1, 2}, 2).x) + sig::unnamed(1, 2) + sig::method_ptr(&sig::Counter::add, &c);
}

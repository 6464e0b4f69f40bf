// SPDX-License-Identifier: MIT
// Functions of every shape core/dwarf_signatures.h reads, for
// tests/unit/dwarf_signatures_test.cpp: built -O2 -g by GCC and clang for
// this machine, and by GCC for aarch64 and riscv64.
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEEP __attribute__((noinline, used))

enum color { RED = 1, GREEN = 2, BLUE = -3 };
enum mask { M_LOW = 1, M_HIGH = 0x80000000u };

struct point { int x; int y; };
struct pair { double a; double b; };
struct big { long a, b, c; char tag[8]; };
struct rect { struct point lo; struct point hi; };
struct mixed { uint8_t u8; int16_t i16; enum color c; const char *label; float f; void *p; };
struct arrays { int v[3]; struct point pts[2]; char name[4]; };
struct with_union { int tag; union { int i; float f; } u; };
struct with_bits { unsigned a : 3; unsigned b : 5; int c; };
struct flex { long n; int data[]; };
struct huge { int v[100]; };
struct __attribute__((aligned(32))) aligned { int x; };
typedef struct { short s; char c; } anon_t;
typedef const char *cstr;
union number { int i; float f; };

KEEP int8_t sig_i8(int8_t a, uint8_t b) { return (int8_t)(a + b); }
KEEP int16_t sig_i16(int16_t a, uint16_t b) { return (int16_t)(a - b); }
KEEP int32_t sig_i32(int32_t a, uint32_t b) { return a ^ (int32_t)b; }
KEEP uint64_t sig_u64(int64_t a, uint64_t b) { return (uint64_t)a * b; }
KEEP signed char sig_schar(signed char a, unsigned char b) { return (signed char)(a | b); }
KEEP bool sig_bool(bool a, _Bool b) { return a && b; }
KEEP char sig_char(char c) { return (char)(c + 1); }
KEEP enum color sig_enum(enum color c, enum mask m) { return m == M_HIGH ? BLUE : c; }
KEEP float sig_float(float f) { return f * 2.0f; }
KEEP double sig_double(double d, float f) { return d + f; }
KEEP long double sig_long_double(long double x) { return x / 3; }
KEEP _Complex double sig_complex(_Complex double z) { return z * z; }
KEEP void *sig_ptr(void *p, int *q, const volatile int *r) { return (char *)p + (q != r); }
KEEP const char *sig_str(const char *s, char *t, unsigned char *u, cstr w, const char *const k) {
  return s ? s : t ? t : u ? (const char *)u : w ? w : k;
}
KEEP size_t sig_size(size_t n, ptrdiff_t d) { return n + (size_t)d; }
KEEP struct point sig_point(struct point p) { p.x += p.y; return p; }
KEEP struct pair sig_pair(struct pair p) { p.a *= p.b; return p; }
KEEP struct big sig_big(struct big b) { b.a += b.c; b.tag[0] = 'x'; return b; }
KEEP struct rect sig_rect(struct rect r) { r.hi.x += r.lo.y; return r; }
KEEP int sig_mixed(struct mixed m) { return m.u8 + m.i16 + (int)m.c + (m.label != 0) + (int)m.f; }
KEEP int sig_arrays(struct arrays a) { return a.v[2] + a.pts[1].y + a.name[3]; }
KEEP int sig_opaque(struct with_union u, struct with_bits b) { return u.tag + (int)b.b + b.c; }
KEEP long sig_flex(struct flex f) { return f.n; }
KEEP int sig_huge(struct huge h) { return h.v[99]; }
KEEP int sig_aligned(struct aligned a) { return a.x; }
KEEP int sig_anon(anon_t a) { return a.s + a.c; }
KEEP int sig_union(union number n) { return n.i; }
KEEP int sig_fnptr(int (*cb)(int), int x) { return cb(x); }
KEEP long sig_many(int a, int b, int c, int d, int e, int f, int g, int h, int i, long j) {
  return a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8 + i * 9 + j * 10;
}
KEEP int sig_variadic(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = 0;
  for (const char *p = fmt; *p; ++p) n += va_arg(ap, int);
  va_end(ap);
  return n;
}
KEEP void sig_void(void) { __asm__ volatile("" ::: "memory"); }

// GCC clones this one for its constant second argument (scale.constprop.0):
// the clone takes one parameter where the source says two.
static __attribute__((noinline)) int scale(int x, int factor) {
  __asm__ volatile("" ::: "memory");
  return x * factor + 1;
}
KEEP int sig_scale_a(int x) { return scale(x, 3) + 1; }
KEEP int sig_scale_b(int x) { return scale(x + 1, 3) - 1; }

// ...and this one for reading only one field of the struct it is given
// (read.isra.0 takes the field).
static __attribute__((noinline)) long read_field(const struct big *b) {
  return b->c;
}
KEEP long sig_read_a(struct big *b) { return read_field(b) + 1; }
KEEP long sig_read_b(struct big *b) { return read_field(b) * 2; }

// GCC splits this one (hot/cold partitioning): its DIE has DW_AT_ranges,
// the hot part with the entry listed first, sig_cold.cold elsewhere.
volatile int sig_sink;
static __attribute__((cold, noinline)) void report(int code, int x) { sig_sink = code * x; }
KEEP int sig_cold(int x) {
  if (x < 0) {
    report(1, x);
    report(2, x);
    return -1;
  }
  return x * 3;
}

#ifdef SIG_WITH_MAIN
int main(int argc, char **argv) {
  (void)argv;
  struct big b = {0};
  return sig_char((char)argc) == 'b' ? 0 : (sig_scale_a(argc) + (int)sig_read_a(&b)) & 1;
}
#endif

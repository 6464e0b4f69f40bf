// SPDX-License-Identifier: MIT
// The --args fixture: functions that take and return each kind ftjit shows
// (integers of every width, bool, char, an enum, float and double, a
// pointer, strings good and bad, structs by value small and big, more
// arguments than registers, a variadic function, a C++ method in
// args_target_method.cpp). Each call is made once, and the program writes
// to argv[1] the line a trace with --args must show for it, with its own
// printf of the same values: the test's oracle.
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

// noipa: no clone with its own convention (.constprop), no call left out
// because its result is unused.
#if defined(__clang__)
#define TRACED __attribute__((noinline, used, optnone))
#else
#define TRACED __attribute__((noinline, noipa, used))
#endif

enum color { RED, GREEN = 5, BLUE };
struct point { int x; int y; };
struct pair { double a; double b; };
struct big { long a; long b; long c; };

TRACED int64_t args_ints(int8_t a, uint16_t b, int32_t c, int64_t d) { return a + b + c + d; }
TRACED unsigned long args_unsigned(unsigned char a, unsigned short b, unsigned int c, unsigned long d) {
  return a + b + c + d;
}
TRACED bool args_bool_char(bool flag, char c) { return flag && c == 'q'; }
TRACED enum color args_enum(enum color c, int shift) { return (enum color)(c + shift); }
TRACED double args_floats(double a, float b, double c) { return a * b + c; }
TRACED void *args_pointer(void *p, long n) { return (char *)p + n; }
TRACED const char *args_string(const char *s, int skip) { return s + skip; }
TRACED size_t args_bad_strings(const char *unmapped, const char *null, const char *unterminated) {
  (void)unmapped;
  (void)null;
  (void)unterminated;
  return 3;
}
TRACED int args_structs(struct point p, struct pair q) { return p.x + p.y + (int)(q.a + q.b); }
TRACED long args_big(struct big b, int k) { return b.a + b.b + b.c + k; }
TRACED long args_many(long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8, long a9,
                      long a10) {
  return a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10;
}
TRACED double args_many_doubles(double d1, double d2, double d3, double d4, double d5, double d6,
                                double d7, double d8, double d9, double d10) {
  return d1 + d2 + d3 + d4 + d5 + d6 + d7 + d8 + d9 + d10;
}
TRACED struct point args_ret_point(int x, int y) {
  struct point p = {x + 1, y + 1};
  return p;
}
TRACED int args_variadic(int n, ...) {
  va_list ap;
  va_start(ap, n);
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += va_arg(ap, int);
  va_end(ap);
  return sum;
}
// Called 8 times with key_len 0..7 and tags "a0".."a7": the --when tests'
// oracle subsets.
TRACED int args_lookup(int key_len, const char *tag, enum color c) { return key_len + (int)strlen(tag) + c; }

int args_method_call(FILE *oracle);  // args_target_method.cpp

static const char *color_name(enum color c) {
  switch (c) {
    case RED: return "RED";
    case GREEN: return "GREEN";
    case BLUE: return "BLUE";
  }
  return "?";
}

// volatile: the calls are made with these values, not folded into them.
static volatile int8_t v_i8 = -3;
static volatile uint16_t v_u16 = 65535;
static volatile int32_t v_i32 = -100000;
static volatile int64_t v_i64 = 1234567890123;

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ORACLE_FILE\n", argv[0]);
    return 2;
  }
  FILE *o = fopen(argv[1], "w");
  if (o == NULL) return 2;

  int64_t r64 = args_ints(v_i8, v_u16, v_i32, v_i64);
  fprintf(o, "args_ints(a=%d, b=%u, c=%d, d=%lld) = %lld;\n", v_i8, v_u16, v_i32, (long long)v_i64,
          (long long)r64);

  unsigned long ru = args_unsigned(200, 60000, 4000000000u, 18000000000000000000ul);
  fprintf(o, "args_unsigned(a=%u, b=%u, c=%u, d=%lu) = %lu;\n", 200u, 60000u, 4000000000u,
          18000000000000000000ul, ru);

  bool rb = args_bool_char(true, 'q');
  fprintf(o, "args_bool_char(flag=%s, c='%c') = %s;\n", "true", 'q', rb ? "true" : "false");

  enum color rc = args_enum(GREEN, 1);
  fprintf(o, "args_enum(c=%s, shift=%d) = %s;\n", color_name(GREEN), 1, color_name(rc));

  double rd = args_floats(2.5, 0.5f, -0.75);
  fprintf(o, "args_floats(a=%g, b=%g, c=%g) = %g;\n", 2.5, 0.5, -0.75, rd);

  static char buffer[64];
  void *rp = args_pointer(buffer, 16);
  fprintf(o, "args_pointer(p=%p, n=%ld) = %p;\n", (void *)buffer, 16L, rp);

  static const char text[] = "hello, \"world\"\n";
  const char *rs = args_string(text, 7);
  fprintf(o, "args_string(s=\"hello, \\\"world\\\"\\n\", skip=%d) = \"\\\"world\\\"\\n\";\n",
          (int)(rs - text));

  // A page with no access: its address is a pointer that cannot be read.
  char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  static char unterminated[40];
  memset(unterminated, 'x', sizeof unterminated);
  size_t rz = args_bad_strings(page, NULL, unterminated);
  fprintf(o, "args_bad_strings(unmapped=<unreadable %p>, null=NULL, unterminated=\"%.32s\"...) = %zu;\n",
          (void *)page, unterminated, rz);

  struct point p = {3, -4};
  struct pair q = {1.5, -2.25};
  int ri = args_structs(p, q);
  fprintf(o, "args_structs(p={x=%d, y=%d}, q={a=%g, b=%g}) = %d;\n", p.x, p.y, q.a, q.b, ri);

  struct big b = {100, 200, 300};
  long rl = args_big(b, 7);
  fprintf(o, "args_big(b={a=%ld, b=%ld, c=%ld}, k=%d) = %ld;\n", b.a, b.b, b.c, 7, rl);

  rl = args_many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
  fprintf(o, "args_many(a1=1, a2=2, a3=3, a4=4, a5=5, a6=6, a7=7, a8=8, a9=9, a10=10) = %ld;\n", rl);

  rd = args_many_doubles(0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5);
  fprintf(o, "args_many_doubles(d1=0.5, d2=1.5, d3=2.5, d4=3.5, d5=4.5, d6=5.5, d7=6.5, d8=7.5, d9=8.5, "
             "d10=9.5) = %g;\n", rd);

  struct point rpt = args_ret_point(10, 20);
  fprintf(o, "args_ret_point(x=10, y=20) = {x=%d, y=%d};\n", rpt.x, rpt.y);

  ri = args_variadic(3, 4, 5, 6);
  fprintf(o, "args_variadic(n=3, ...) = %d;\n", ri);

  for (int i = 0; i < 8; ++i) {
    char tag[8];
    snprintf(tag, sizeof tag, "a%d", i);
    enum color c = i % 2 == 0 ? RED : BLUE;
    ri = args_lookup(i, tag, c);
    fprintf(o, "args_lookup(key_len=%d, tag=\"%s\", c=%s) = %d;\n", i, tag, color_name(c), ri);
  }

  args_method_call(o);
  fclose(o);
  return 0;
}

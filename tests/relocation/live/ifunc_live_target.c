// SPDX-License-Identifier: MIT
// IFUNCs in a library built without sleds (ifunc_live_test.cpp): GCC's
// ifunc attribute, each resolver returning a static function, which a
// stripped copy of this file knows only by its .eh_frame FDE.
//
//   ifl_mix, ifl_twin  two IFUNCs of one implementation (mix_impl), each
//                      called from inside the library through a hidden
//                      IFUNC of the same resolver, so through an IRELATIVE
//                      word (as libc calls its own)
//   ifl_lone           an IFUNC nothing here calls: no IRELATIVE word, the
//                      loader resolves it for dlsym only
//   ifl_fickle         an IFUNC whose resolver answers the loader (the
//                      IRELATIVE word the library calls through) with
//                      fickle_first and every later lookup (dlsym) with
//                      fickle_later: what the process's calls reach is the
//                      word's
//   ifl_call_*         the library's callers, of these and of libc's
//                      strlen, memcpy and memset (the test counts calls whose
//                      return address lies in this library)
#include <stddef.h>
#include <string.h>

typedef long (*mix_fn)(long, long);

// The resolvers' choice, read at load time: volatile, so that the decoy
// stays in the file.
static volatile int choose_fast = 1;

__attribute__((noinline)) static long mix_impl(long a, long b) {
  long r = a;
  for (long i = 0; i < (b & 7); ++i) r = r * 31 + b;
  return r ^ 0x5a;
}

__attribute__((noinline)) static long mix_decoy(long a, long b) { return a - b; }

__attribute__((noinline)) static long lone_impl(long a, long b) {
  long r = b;
  for (long i = 0; i < (a & 3); ++i) r += a * i;
  return r + 1;
}

__attribute__((noinline)) static long fickle_first(long a, long b) {
  long r = a;
  for (long i = 0; i < (b & 7); ++i) r = r * 3 + b;
  return r + 7;
}

__attribute__((noinline)) static long fickle_later(long a, long b) {
  long r = b;
  for (long i = 0; i < (a & 7); ++i) r = r * 5 - a;
  return r - 7;
}

static int fickle_lookups;
static mix_fn resolve_fickle(void) { return fickle_lookups++ == 0 ? fickle_first : fickle_later; }

static mix_fn resolve_mix(void) { return choose_fast ? mix_impl : mix_decoy; }
static mix_fn resolve_twin(void) { return choose_fast ? mix_impl : mix_decoy; }
static mix_fn resolve_lone(void) { return choose_fast ? lone_impl : mix_decoy; }

long ifl_mix(long a, long b) __attribute__((ifunc("resolve_mix")));
long ifl_twin(long a, long b) __attribute__((ifunc("resolve_twin")));
long ifl_lone(long a, long b) __attribute__((ifunc("resolve_lone")));
long ifl_fickle(long a, long b) __attribute__((ifunc("resolve_fickle")));
// What the library's own calls go through: not preemptible, so the linker
// resolves them with an IRELATIVE relocation whose addend is the resolver.
__attribute__((visibility("hidden"))) long mix_internal(long a, long b) __attribute__((ifunc("resolve_mix")));
__attribute__((visibility("hidden"))) long twin_internal(long a, long b) __attribute__((ifunc("resolve_twin")));
__attribute__((visibility("hidden"))) long fickle_internal(long a, long b) __attribute__((ifunc("resolve_fickle")));

// Not tail calls (-fno-optimize-sibling-calls): the callee's return
// address is here.
long ifl_call_mix(long a, long b) { return mix_internal(a, b) + 1; }
long ifl_call_twin(long a, long b) { return twin_internal(a, b) + 1; }
long ifl_call_fickle(long a, long b) { return fickle_internal(a, b) + 1; }
size_t ifl_call_strlen(const char* s) { return strlen(s) + 1; }
void* ifl_call_memcpy(void* to, const void* from, size_t n) { return memcpy(to, from, n); }
void* ifl_call_memset(void* to, int c, size_t n) { return memset(to, c, n); }

#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the examples against an installed ftjit and checks what they
# print, then builds the plugin and the embedder once more with pkg-config
# alone.   check.sh PREFIX BUILD_DIR
set -eu
prefix=$(cd "$1" && pwd)
build=$2
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }

cmake -S "$here" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

# The embedder: exact call counts (fib(15) makes 1973 calls, 987 of them
# reach work_leaf; the loop 1000 more), results unchanged.
out=$("$build/tiny_profiler")
echo "$out"
echo "$out" | grep -Eq '^work_fib +1973 calls' || fail "work_fib count"
echo "$out" | grep -Eq '^work_leaf +1987 calls' || fail "work_leaf count"
echo "$out" | grep -Eq '^work_loop +1 calls' || fail "work_loop count"
echo "$out" | grep -q '^result .* unchanged$' || fail "result changed under tracing"

# The plugin: the installed ftjit finds it, loads it, checks its ABI and
# options, and lists it next to the built-in ones (installed beside it).
out=$(FTJIT_PLUGIN_PATH="$build" "$prefix/bin/ftjit" plugins)
echo "$out"
echo "$out" | grep -q '^hello  *counts calls and returns' || fail "hello plugin not listed"
echo "$out" | grep -q 'greeting=<string> (default hello)' || fail "hello's option"
echo "$out" | grep -q "^count .*" || fail "built-in plugins not found beside the installed ftjit"
echo "$out" | grep -q "$prefix/bin/../lib" || fail "built-ins not taken from the prefix"

# The installed CLI traces a program from outside with the example plugin:
# `ftjit run` finds the installed agent beside it and loads the plugin into
# the program. fib(15) calls work_fib 1973 times, work_leaf 987.
printf '#include <stdio.h>\nint work_fib(int);\nint main(void) { printf("%%d\\n", work_fib(15)); return 0; }\n' \
  >"$build/run_me.c"
cc -O2 -fpatchable-function-entry=5 "$build/run_me.c" "$here/tiny_profiler/work.c" -o "$build/run_me"
untraced=$("$build/run_me")
out=$("$prefix/bin/ftjit" run --plugin count --format tsv --filter "work_*" -o "$build/run_me.tsv" -- "$build/run_me")
[ "$out" = "$untraced" ] || fail "run_me printed '$out' under ftjit run, '$untraced' alone"
printf 'work_fib\t1973\nwork_leaf\t987\n' | cmp -s - "$build/run_me.tsv" || {
  cat "$build/run_me.tsv"; fail "ftjit run (installed) counts"; }
out=$("$prefix/bin/ftjit" run --plugin "$build/ftjit-plugin-hello.so" -- "$build/run_me")
echo "$out"
echo "$out" | grep -q "^$untraced\$" || fail "hello plugin under ftjit run"

# The arguments services, from a plugin of our own: the program built
# with -g, its parameters named from the DWARF, the last call's values.
cc -O2 -g -fpatchable-function-entry=5 "$build/run_me.c" "$here/tiny_profiler/work.c" -o "$build/run_me_g"
out=$("$prefix/bin/ftjit" run --args --plugin "$build/ftjit-plugin-lastargs.so" --filter work_fib -- "$build/run_me_g")
echo "$out"
echo "$out" | grep -q '^work_fib(int n): 1973 calls, last (n=[0-9]*) = [0-9]*$' || fail "lastargs plugin under ftjit run --args"

# pkg-config alone, as a Makefile would.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -shared -fPIC $(pkg-config --cflags ftjit-plugin) "$here/hello_plugin/hello.c" -o "$build/hello-pc.so"
cc -c -O2 -fpatchable-function-entry=5 "$here/tiny_profiler/work.c" -o "$build/work-pc.o"
c++ -std=c++20 $(pkg-config --cflags ftjit) "$here/tiny_profiler/profiler.cpp" "$build/work-pc.o" \
  $(pkg-config --libs ftjit) -o "$build/tiny_profiler-pc"
"$build/tiny_profiler-pc" | grep -q '^result .* unchanged$' || fail "pkg-config build"
echo PASS

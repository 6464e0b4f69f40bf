// SPDX-License-Identifier: MIT
// The structs of signatures.c, also compiled into calling_convention_test.cpp
// (C and C++ lay these out alike), which reads their layouts with offsetof:
// the ValueTypes the test hands place_arguments are these, not a copy.
#pragma once

enum color { kRed, kGreen, kBlue };

struct ii { int a, b; };                  // INTEGER; one x/a register
struct dd { double a, b; };               // SSE SSE; HFA of 2; fa fa
struct fi { float a; int b; };            // INTEGER; x register; fa + a
struct if_ { int a; float b; };           // INTEGER; x register; a + fa
struct dl { double a; long b; };          // SSE INTEGER; x x; fa + a
struct ld_ { long a; double b; };         // INTEGER SSE; x x; a + fa
struct ff { float a, b; };                // SSE; HFA of 2; fa fa
struct f3 { float a, b, c; };             // SSE SSE; HFA of 3; a a
struct f4 { float a, b, c, d; };          // SSE SSE; HFA of 4; a a
struct d3 { double a, b, c; };            // MEMORY; HFA of 3; by reference
struct fd { float a; double b; };         // SSE SSE; x x (not an HFA); fa fa
struct cf { char c; float f; };           // INTEGER; x; a + fa
struct ci { char c; int i; };             // INTEGER; x; a
struct c3 { char a, b, c; };              // 3 bytes
struct s12 { int a, b, c; };              // INTEGER INTEGER, 12 bytes
struct l2 { long a, b; };                 // INTEGER INTEGER
struct il { int a; long b; };             // INTEGER INTEGER (padding)
struct one_d { double d; };
struct one_f { float f; };
struct big { long a, b, c; };             // 24 bytes: MEMORY; by reference
struct big40 { long a, b, c, d, e; };     // 40 bytes
struct bigmix { double a; int b; float c; long d; };  // 24 bytes, mixed
struct q { __int128 x; };                 // 16-aligned by its member
struct al16 { long a, b; } __attribute__((aligned(16)));  // 16-aligned by the struct
struct a32 { long a, b, c, d; } __attribute__((aligned(32)));  // x86-64: a 32-aligned stack slot
struct pk { char c; int i; } __attribute__((packed));    // 5 bytes, misaligned int
union uf { float f; int i; };             // kUnsupported: placed by size (INTEGER on x86-64)
struct opq { union uf u; int j; };        // opaque (a union member): placed by size

// SPDX-License-Identifier: MIT
// Functions whose code shows where the compiler reads each parameter and
// writes the return value, compiled to assembly (-O2 -S) for each ISA by
// tests/unit/calling_convention.cmake and read by calling_convention_test.cpp:
//
//   void f(T0 p0, T1 p1, ...)   stores parameter i to the volatile global g_f_i
//                               (the volatile store is done as written, from
//                               wherever the parameter is: a register or
//                               the caller's stack)
//   R f(...)                    returns the global r_f (not volatile: one
//                               load into the return registers)
//
// The test parses each definition's first line, `R name(T0 p0, T1 p1, ...) {`
// (the types of types.h or C's scalars, each known to the test's table),
// for the signature it hands place_arguments: keep that form when adding
// one.
#include "types.h"

char volatile g_ints9_0;
unsigned char volatile g_ints9_1;
short volatile g_ints9_2;
int volatile g_ints9_3;
long volatile g_ints9_4;
unsigned long volatile g_ints9_5;
_Bool volatile g_ints9_6;
int volatile g_ints9_7;
long volatile g_ints9_8;
void ints9(char p0, unsigned char p1, short p2, int p3, long p4, unsigned long p5, _Bool p6, int p7, long p8) {
  g_ints9_0 = p0;
  g_ints9_1 = p1;
  g_ints9_2 = p2;
  g_ints9_3 = p3;
  g_ints9_4 = p4;
  g_ints9_5 = p5;
  g_ints9_6 = p6;
  g_ints9_7 = p7;
  g_ints9_8 = p8;
}

long volatile g_ints11_0;
long volatile g_ints11_1;
long volatile g_ints11_2;
long volatile g_ints11_3;
long volatile g_ints11_4;
long volatile g_ints11_5;
long volatile g_ints11_6;
long volatile g_ints11_7;
int volatile g_ints11_8;
short volatile g_ints11_9;
char volatile g_ints11_10;
void ints11(long p0, long p1, long p2, long p3, long p4, long p5, long p6, long p7, int p8, short p9, char p10) {
  g_ints11_0 = p0;
  g_ints11_1 = p1;
  g_ints11_2 = p2;
  g_ints11_3 = p3;
  g_ints11_4 = p4;
  g_ints11_5 = p5;
  g_ints11_6 = p6;
  g_ints11_7 = p7;
  g_ints11_8 = p8;
  g_ints11_9 = p9;
  g_ints11_10 = p10;
}

char * volatile g_pointers_0;
void * volatile g_pointers_1;
enum color volatile g_pointers_2;
const char * volatile g_pointers_3;
unsigned short volatile g_pointers_4;
void pointers(char *p0, void *p1, enum color p2, const char *p3, unsigned short p4) {
  g_pointers_0 = p0;
  g_pointers_1 = p1;
  g_pointers_2 = p2;
  g_pointers_3 = p3;
  g_pointers_4 = p4;
}

double volatile g_doubles10_0;
double volatile g_doubles10_1;
double volatile g_doubles10_2;
double volatile g_doubles10_3;
double volatile g_doubles10_4;
double volatile g_doubles10_5;
double volatile g_doubles10_6;
double volatile g_doubles10_7;
double volatile g_doubles10_8;
double volatile g_doubles10_9;
void doubles10(double p0, double p1, double p2, double p3, double p4, double p5, double p6, double p7, double p8, double p9) {
  g_doubles10_0 = p0;
  g_doubles10_1 = p1;
  g_doubles10_2 = p2;
  g_doubles10_3 = p3;
  g_doubles10_4 = p4;
  g_doubles10_5 = p5;
  g_doubles10_6 = p6;
  g_doubles10_7 = p7;
  g_doubles10_8 = p8;
  g_doubles10_9 = p9;
}

float volatile g_floats10_0;
double volatile g_floats10_1;
float volatile g_floats10_2;
double volatile g_floats10_3;
float volatile g_floats10_4;
double volatile g_floats10_5;
float volatile g_floats10_6;
double volatile g_floats10_7;
float volatile g_floats10_8;
double volatile g_floats10_9;
void floats10(float p0, double p1, float p2, double p3, float p4, double p5, float p6, double p7, float p8, double p9) {
  g_floats10_0 = p0;
  g_floats10_1 = p1;
  g_floats10_2 = p2;
  g_floats10_3 = p3;
  g_floats10_4 = p4;
  g_floats10_5 = p5;
  g_floats10_6 = p6;
  g_floats10_7 = p7;
  g_floats10_8 = p8;
  g_floats10_9 = p9;
}

double volatile g_doubles9_ints_0;
double volatile g_doubles9_ints_1;
double volatile g_doubles9_ints_2;
double volatile g_doubles9_ints_3;
double volatile g_doubles9_ints_4;
double volatile g_doubles9_ints_5;
double volatile g_doubles9_ints_6;
double volatile g_doubles9_ints_7;
double volatile g_doubles9_ints_8;
int volatile g_doubles9_ints_9;
float volatile g_doubles9_ints_10;
long volatile g_doubles9_ints_11;
void doubles9_ints(double p0, double p1, double p2, double p3, double p4, double p5, double p6, double p7, double p8, int p9, float p10, long p11) {
  g_doubles9_ints_0 = p0;
  g_doubles9_ints_1 = p1;
  g_doubles9_ints_2 = p2;
  g_doubles9_ints_3 = p3;
  g_doubles9_ints_4 = p4;
  g_doubles9_ints_5 = p5;
  g_doubles9_ints_6 = p6;
  g_doubles9_ints_7 = p7;
  g_doubles9_ints_8 = p8;
  g_doubles9_ints_9 = p9;
  g_doubles9_ints_10 = p10;
  g_doubles9_ints_11 = p11;
}

int volatile g_mixed_0;
double volatile g_mixed_1;
long volatile g_mixed_2;
float volatile g_mixed_3;
char volatile g_mixed_4;
double volatile g_mixed_5;
unsigned int volatile g_mixed_6;
void mixed(int p0, double p1, long p2, float p3, char p4, double p5, unsigned int p6) {
  g_mixed_0 = p0;
  g_mixed_1 = p1;
  g_mixed_2 = p2;
  g_mixed_3 = p3;
  g_mixed_4 = p4;
  g_mixed_5 = p5;
  g_mixed_6 = p6;
}

struct ii volatile g_small_structs_0;
struct dd volatile g_small_structs_1;
struct fi volatile g_small_structs_2;
struct dl volatile g_small_structs_3;
struct ff volatile g_small_structs_4;
void small_structs(struct ii p0, struct dd p1, struct fi p2, struct dl p3, struct ff p4) {
  g_small_structs_0 = p0;
  g_small_structs_1 = p1;
  g_small_structs_2 = p2;
  g_small_structs_3 = p3;
  g_small_structs_4 = p4;
}

struct if_ volatile g_small_structs2_0;
struct ld_ volatile g_small_structs2_1;
struct fd volatile g_small_structs2_2;
struct cf volatile g_small_structs2_3;
struct ci volatile g_small_structs2_4;
void small_structs2(struct if_ p0, struct ld_ p1, struct fd p2, struct cf p3, struct ci p4) {
  g_small_structs2_0 = p0;
  g_small_structs2_1 = p1;
  g_small_structs2_2 = p2;
  g_small_structs2_3 = p3;
  g_small_structs2_4 = p4;
}

struct c3 volatile g_odd_sizes_0;
struct s12 volatile g_odd_sizes_1;
struct one_d volatile g_odd_sizes_2;
struct one_f volatile g_odd_sizes_3;
struct il volatile g_odd_sizes_4;
void odd_sizes(struct c3 p0, struct s12 p1, struct one_d p2, struct one_f p3, struct il p4) {
  g_odd_sizes_0 = p0;
  g_odd_sizes_1 = p1;
  g_odd_sizes_2 = p2;
  g_odd_sizes_3 = p3;
  g_odd_sizes_4 = p4;
}

struct f3 volatile g_hfas_0;
struct d3 volatile g_hfas_1;
struct f4 volatile g_hfas_2;
double volatile g_hfas_3;
void hfas(struct f3 p0, struct d3 p1, struct f4 p2, double p3) {
  g_hfas_0 = p0;
  g_hfas_1 = p1;
  g_hfas_2 = p2;
  g_hfas_3 = p3;
}

double volatile g_hfa_overflow_0;
double volatile g_hfa_overflow_1;
double volatile g_hfa_overflow_2;
double volatile g_hfa_overflow_3;
double volatile g_hfa_overflow_4;
double volatile g_hfa_overflow_5;
struct f3 volatile g_hfa_overflow_6;
double volatile g_hfa_overflow_7;
float volatile g_hfa_overflow_8;
void hfa_overflow(double p0, double p1, double p2, double p3, double p4, double p5, struct f3 p6, double p7, float p8) {
  g_hfa_overflow_0 = p0;
  g_hfa_overflow_1 = p1;
  g_hfa_overflow_2 = p2;
  g_hfa_overflow_3 = p3;
  g_hfa_overflow_4 = p4;
  g_hfa_overflow_5 = p5;
  g_hfa_overflow_6 = p6;
  g_hfa_overflow_7 = p7;
  g_hfa_overflow_8 = p8;
}

double volatile g_hfa_overflow_d3_0;
double volatile g_hfa_overflow_d3_1;
double volatile g_hfa_overflow_d3_2;
double volatile g_hfa_overflow_d3_3;
double volatile g_hfa_overflow_d3_4;
double volatile g_hfa_overflow_d3_5;
struct d3 volatile g_hfa_overflow_d3_6;
double volatile g_hfa_overflow_d3_7;
void hfa_overflow_d3(double p0, double p1, double p2, double p3, double p4, double p5, struct d3 p6, double p7) {
  g_hfa_overflow_d3_0 = p0;
  g_hfa_overflow_d3_1 = p1;
  g_hfa_overflow_d3_2 = p2;
  g_hfa_overflow_d3_3 = p3;
  g_hfa_overflow_d3_4 = p4;
  g_hfa_overflow_d3_5 = p5;
  g_hfa_overflow_d3_6 = p6;
  g_hfa_overflow_d3_7 = p7;
}

struct big volatile g_bigs_0;
int volatile g_bigs_1;
struct big40 volatile g_bigs_2;
struct bigmix volatile g_bigs_3;
void bigs(struct big p0, int p1, struct big40 p2, struct bigmix p3) {
  g_bigs_0 = p0;
  g_bigs_1 = p1;
  g_bigs_2 = p2;
  g_bigs_3 = p3;
}

long volatile g_bigs_after_regs_0;
long volatile g_bigs_after_regs_1;
long volatile g_bigs_after_regs_2;
long volatile g_bigs_after_regs_3;
long volatile g_bigs_after_regs_4;
long volatile g_bigs_after_regs_5;
long volatile g_bigs_after_regs_6;
long volatile g_bigs_after_regs_7;
struct big volatile g_bigs_after_regs_8;
int volatile g_bigs_after_regs_9;
void bigs_after_regs(long p0, long p1, long p2, long p3, long p4, long p5, long p6, long p7, struct big p8, int p9) {
  g_bigs_after_regs_0 = p0;
  g_bigs_after_regs_1 = p1;
  g_bigs_after_regs_2 = p2;
  g_bigs_after_regs_3 = p3;
  g_bigs_after_regs_4 = p4;
  g_bigs_after_regs_5 = p5;
  g_bigs_after_regs_6 = p6;
  g_bigs_after_regs_7 = p7;
  g_bigs_after_regs_8 = p8;
  g_bigs_after_regs_9 = p9;
}

long volatile g_struct_no_room_0;
long volatile g_struct_no_room_1;
long volatile g_struct_no_room_2;
long volatile g_struct_no_room_3;
long volatile g_struct_no_room_4;
struct l2 volatile g_struct_no_room_5;
long volatile g_struct_no_room_6;
int volatile g_struct_no_room_7;
void struct_no_room(long p0, long p1, long p2, long p3, long p4, struct l2 p5, long p6, int p7) {
  g_struct_no_room_0 = p0;
  g_struct_no_room_1 = p1;
  g_struct_no_room_2 = p2;
  g_struct_no_room_3 = p3;
  g_struct_no_room_4 = p4;
  g_struct_no_room_5 = p5;
  g_struct_no_room_6 = p6;
  g_struct_no_room_7 = p7;
}

double volatile g_struct_no_room_fp_0;
double volatile g_struct_no_room_fp_1;
double volatile g_struct_no_room_fp_2;
double volatile g_struct_no_room_fp_3;
double volatile g_struct_no_room_fp_4;
double volatile g_struct_no_room_fp_5;
double volatile g_struct_no_room_fp_6;
struct dd volatile g_struct_no_room_fp_7;
double volatile g_struct_no_room_fp_8;
struct dl volatile g_struct_no_room_fp_9;
long volatile g_struct_no_room_fp_10;
void struct_no_room_fp(double p0, double p1, double p2, double p3, double p4, double p5, double p6, struct dd p7, double p8, struct dl p9, long p10) {
  g_struct_no_room_fp_0 = p0;
  g_struct_no_room_fp_1 = p1;
  g_struct_no_room_fp_2 = p2;
  g_struct_no_room_fp_3 = p3;
  g_struct_no_room_fp_4 = p4;
  g_struct_no_room_fp_5 = p5;
  g_struct_no_room_fp_6 = p6;
  g_struct_no_room_fp_7 = p7;
  g_struct_no_room_fp_8 = p8;
  g_struct_no_room_fp_9 = p9;
  g_struct_no_room_fp_10 = p10;
}

long volatile g_structs_on_stack_0;
long volatile g_structs_on_stack_1;
long volatile g_structs_on_stack_2;
long volatile g_structs_on_stack_3;
long volatile g_structs_on_stack_4;
long volatile g_structs_on_stack_5;
long volatile g_structs_on_stack_6;
long volatile g_structs_on_stack_7;
struct ii volatile g_structs_on_stack_8;
struct dd volatile g_structs_on_stack_9;
struct s12 volatile g_structs_on_stack_10;
int volatile g_structs_on_stack_11;
void structs_on_stack(long p0, long p1, long p2, long p3, long p4, long p5, long p6, long p7, struct ii p8, struct dd p9, struct s12 p10, int p11) {
  g_structs_on_stack_0 = p0;
  g_structs_on_stack_1 = p1;
  g_structs_on_stack_2 = p2;
  g_structs_on_stack_3 = p3;
  g_structs_on_stack_4 = p4;
  g_structs_on_stack_5 = p5;
  g_structs_on_stack_6 = p6;
  g_structs_on_stack_7 = p7;
  g_structs_on_stack_8 = p8;
  g_structs_on_stack_9 = p9;
  g_structs_on_stack_10 = p10;
  g_structs_on_stack_11 = p11;
}

int volatile g_int128_0;
__int128 volatile g_int128_1;
long volatile g_int128_2;
void int128(int p0, __int128 p1, long p2) {
  g_int128_0 = p0;
  g_int128_1 = p1;
  g_int128_2 = p2;
}

long volatile g_int128_split_0;
long volatile g_int128_split_1;
long volatile g_int128_split_2;
long volatile g_int128_split_3;
long volatile g_int128_split_4;
long volatile g_int128_split_5;
long volatile g_int128_split_6;
__int128 volatile g_int128_split_7;
long volatile g_int128_split_8;
void int128_split(long p0, long p1, long p2, long p3, long p4, long p5, long p6, __int128 p7, long p8) {
  g_int128_split_0 = p0;
  g_int128_split_1 = p1;
  g_int128_split_2 = p2;
  g_int128_split_3 = p3;
  g_int128_split_4 = p4;
  g_int128_split_5 = p5;
  g_int128_split_6 = p6;
  g_int128_split_7 = p7;
  g_int128_split_8 = p8;
}

long volatile g_int128_stack_0;
long volatile g_int128_stack_1;
long volatile g_int128_stack_2;
long volatile g_int128_stack_3;
long volatile g_int128_stack_4;
long volatile g_int128_stack_5;
long volatile g_int128_stack_6;
long volatile g_int128_stack_7;
int volatile g_int128_stack_8;
__int128 volatile g_int128_stack_9;
long volatile g_int128_stack_10;
void int128_stack(long p0, long p1, long p2, long p3, long p4, long p5, long p6, long p7, int p8, __int128 p9, long p10) {
  g_int128_stack_0 = p0;
  g_int128_stack_1 = p1;
  g_int128_stack_2 = p2;
  g_int128_stack_3 = p3;
  g_int128_stack_4 = p4;
  g_int128_stack_5 = p5;
  g_int128_stack_6 = p6;
  g_int128_stack_7 = p7;
  g_int128_stack_8 = p8;
  g_int128_stack_9 = p9;
  g_int128_stack_10 = p10;
}

long volatile g_int128_one_reg_left_0;
long volatile g_int128_one_reg_left_1;
long volatile g_int128_one_reg_left_2;
long volatile g_int128_one_reg_left_3;
long volatile g_int128_one_reg_left_4;
__int128 volatile g_int128_one_reg_left_5;
long volatile g_int128_one_reg_left_6;
void int128_one_reg_left(long p0, long p1, long p2, long p3, long p4, __int128 p5, long p6) {
  g_int128_one_reg_left_0 = p0;
  g_int128_one_reg_left_1 = p1;
  g_int128_one_reg_left_2 = p2;
  g_int128_one_reg_left_3 = p3;
  g_int128_one_reg_left_4 = p4;
  g_int128_one_reg_left_5 = p5;
  g_int128_one_reg_left_6 = p6;
}

int volatile g_struct_q_0;
struct q volatile g_struct_q_1;
long volatile g_struct_q_2;
void struct_q(int p0, struct q p1, long p2) {
  g_struct_q_0 = p0;
  g_struct_q_1 = p1;
  g_struct_q_2 = p2;
}

long volatile g_struct_q_split_0;
long volatile g_struct_q_split_1;
long volatile g_struct_q_split_2;
long volatile g_struct_q_split_3;
long volatile g_struct_q_split_4;
long volatile g_struct_q_split_5;
long volatile g_struct_q_split_6;
struct q volatile g_struct_q_split_7;
long volatile g_struct_q_split_8;
void struct_q_split(long p0, long p1, long p2, long p3, long p4, long p5, long p6, struct q p7, long p8) {
  g_struct_q_split_0 = p0;
  g_struct_q_split_1 = p1;
  g_struct_q_split_2 = p2;
  g_struct_q_split_3 = p3;
  g_struct_q_split_4 = p4;
  g_struct_q_split_5 = p5;
  g_struct_q_split_6 = p6;
  g_struct_q_split_7 = p7;
  g_struct_q_split_8 = p8;
}

int volatile g_al16_0;
struct al16 volatile g_al16_1;
long volatile g_al16_2;
void al16(int p0, struct al16 p1, long p2) {
  g_al16_0 = p0;
  g_al16_1 = p1;
  g_al16_2 = p2;
}

long volatile g_al16_stack_0;
long volatile g_al16_stack_1;
long volatile g_al16_stack_2;
long volatile g_al16_stack_3;
long volatile g_al16_stack_4;
long volatile g_al16_stack_5;
long volatile g_al16_stack_6;
long volatile g_al16_stack_7;
int volatile g_al16_stack_8;
struct al16 volatile g_al16_stack_9;
long volatile g_al16_stack_10;
void al16_stack(long p0, long p1, long p2, long p3, long p4, long p5, long p6, long p7, int p8, struct al16 p9, long p10) {
  g_al16_stack_0 = p0;
  g_al16_stack_1 = p1;
  g_al16_stack_2 = p2;
  g_al16_stack_3 = p3;
  g_al16_stack_4 = p4;
  g_al16_stack_5 = p5;
  g_al16_stack_6 = p6;
  g_al16_stack_7 = p7;
  g_al16_stack_8 = p8;
  g_al16_stack_9 = p9;
  g_al16_stack_10 = p10;
}

long volatile g_a32_stack_0;
long volatile g_a32_stack_1;
long volatile g_a32_stack_2;
long volatile g_a32_stack_3;
long volatile g_a32_stack_4;
long volatile g_a32_stack_5;
long volatile g_a32_stack_6;
struct a32 volatile g_a32_stack_7;
long volatile g_a32_stack_8;
void a32_stack(long p0, long p1, long p2, long p3, long p4, long p5, long p6, struct a32 p7, long p8) {
  g_a32_stack_0 = p0;
  g_a32_stack_1 = p1;
  g_a32_stack_2 = p2;
  g_a32_stack_3 = p3;
  g_a32_stack_4 = p4;
  g_a32_stack_5 = p5;
  g_a32_stack_6 = p6;
  g_a32_stack_7 = p7;
  g_a32_stack_8 = p8;
}

long double volatile g_long_doubles_0;
int volatile g_long_doubles_1;
double volatile g_long_doubles_2;
long double volatile g_long_doubles_3;
long volatile g_long_doubles_4;
void long_doubles(long double p0, int p1, double p2, long double p3, long p4) {
  g_long_doubles_0 = p0;
  g_long_doubles_1 = p1;
  g_long_doubles_2 = p2;
  g_long_doubles_3 = p3;
  g_long_doubles_4 = p4;
}

long volatile g_long_double_stack_0;
long volatile g_long_double_stack_1;
long volatile g_long_double_stack_2;
long volatile g_long_double_stack_3;
long volatile g_long_double_stack_4;
long volatile g_long_double_stack_5;
long volatile g_long_double_stack_6;
long volatile g_long_double_stack_7;
int volatile g_long_double_stack_8;
long double volatile g_long_double_stack_9;
long volatile g_long_double_stack_10;
void long_double_stack(long p0, long p1, long p2, long p3, long p4, long p5, long p6, long p7, int p8, long double p9, long p10) {
  g_long_double_stack_0 = p0;
  g_long_double_stack_1 = p1;
  g_long_double_stack_2 = p2;
  g_long_double_stack_3 = p3;
  g_long_double_stack_4 = p4;
  g_long_double_stack_5 = p5;
  g_long_double_stack_6 = p6;
  g_long_double_stack_7 = p7;
  g_long_double_stack_8 = p8;
  g_long_double_stack_9 = p9;
  g_long_double_stack_10 = p10;
}

_Complex double volatile g_complexes_0;
int volatile g_complexes_1;
_Complex float volatile g_complexes_2;
double volatile g_complexes_3;
long volatile g_complexes_4;
void complexes(_Complex double p0, int p1, _Complex float p2, double p3, long p4) {
  g_complexes_0 = p0;
  g_complexes_1 = p1;
  g_complexes_2 = p2;
  g_complexes_3 = p3;
  g_complexes_4 = p4;
}

struct pk volatile g_packed_0;
int volatile g_packed_1;
struct pk volatile g_packed_2;
double volatile g_packed_3;
void packed(struct pk p0, int p1, struct pk p2, double p3) {
  g_packed_0 = p0;
  g_packed_1 = p1;
  g_packed_2 = p2;
  g_packed_3 = p3;
}

double volatile g_fp_int_no_fp_0;
double volatile g_fp_int_no_fp_1;
double volatile g_fp_int_no_fp_2;
double volatile g_fp_int_no_fp_3;
double volatile g_fp_int_no_fp_4;
double volatile g_fp_int_no_fp_5;
double volatile g_fp_int_no_fp_6;
double volatile g_fp_int_no_fp_7;
struct fi volatile g_fp_int_no_fp_8;
struct ff volatile g_fp_int_no_fp_9;
struct dd volatile g_fp_int_no_fp_10;
float volatile g_fp_int_no_fp_11;
struct dl volatile g_fp_int_no_fp_12;
void fp_int_no_fp(double p0, double p1, double p2, double p3, double p4, double p5, double p6, double p7, struct fi p8, struct ff p9, struct dd p10, float p11, struct dl p12) {
  g_fp_int_no_fp_0 = p0;
  g_fp_int_no_fp_1 = p1;
  g_fp_int_no_fp_2 = p2;
  g_fp_int_no_fp_3 = p3;
  g_fp_int_no_fp_4 = p4;
  g_fp_int_no_fp_5 = p5;
  g_fp_int_no_fp_6 = p6;
  g_fp_int_no_fp_7 = p7;
  g_fp_int_no_fp_8 = p8;
  g_fp_int_no_fp_9 = p9;
  g_fp_int_no_fp_10 = p10;
  g_fp_int_no_fp_11 = p11;
  g_fp_int_no_fp_12 = p12;
}

long volatile g_fp_int_no_int_0;
long volatile g_fp_int_no_int_1;
long volatile g_fp_int_no_int_2;
long volatile g_fp_int_no_int_3;
long volatile g_fp_int_no_int_4;
long volatile g_fp_int_no_int_5;
long volatile g_fp_int_no_int_6;
long volatile g_fp_int_no_int_7;
struct fi volatile g_fp_int_no_int_8;
struct ff volatile g_fp_int_no_int_9;
double volatile g_fp_int_no_int_10;
struct if_ volatile g_fp_int_no_int_11;
void fp_int_no_int(long p0, long p1, long p2, long p3, long p4, long p5, long p6, long p7, struct fi p8, struct ff p9, double p10, struct if_ p11) {
  g_fp_int_no_int_0 = p0;
  g_fp_int_no_int_1 = p1;
  g_fp_int_no_int_2 = p2;
  g_fp_int_no_int_3 = p3;
  g_fp_int_no_int_4 = p4;
  g_fp_int_no_int_5 = p5;
  g_fp_int_no_int_6 = p6;
  g_fp_int_no_int_7 = p7;
  g_fp_int_no_int_8 = p8;
  g_fp_int_no_int_9 = p9;
  g_fp_int_no_int_10 = p10;
  g_fp_int_no_int_11 = p11;
}

double volatile g_fp_int_last_fp_0;
double volatile g_fp_int_last_fp_1;
double volatile g_fp_int_last_fp_2;
double volatile g_fp_int_last_fp_3;
double volatile g_fp_int_last_fp_4;
double volatile g_fp_int_last_fp_5;
double volatile g_fp_int_last_fp_6;
struct dd volatile g_fp_int_last_fp_7;
struct dl volatile g_fp_int_last_fp_8;
double volatile g_fp_int_last_fp_9;
void fp_int_last_fp(double p0, double p1, double p2, double p3, double p4, double p5, double p6, struct dd p7, struct dl p8, double p9) {
  g_fp_int_last_fp_0 = p0;
  g_fp_int_last_fp_1 = p1;
  g_fp_int_last_fp_2 = p2;
  g_fp_int_last_fp_3 = p3;
  g_fp_int_last_fp_4 = p4;
  g_fp_int_last_fp_5 = p5;
  g_fp_int_last_fp_6 = p6;
  g_fp_int_last_fp_7 = p7;
  g_fp_int_last_fp_8 = p8;
  g_fp_int_last_fp_9 = p9;
}

struct opq volatile g_opaque_and_union_0;
union uf volatile g_opaque_and_union_1;
double volatile g_opaque_and_union_2;
int volatile g_opaque_and_union_3;
struct opq volatile g_opaque_and_union_4;
float volatile g_opaque_and_union_5;
void opaque_and_union(struct opq p0, union uf p1, double p2, int p3, struct opq p4, float p5) {
  g_opaque_and_union_0 = p0;
  g_opaque_and_union_1 = p1;
  g_opaque_and_union_2 = p2;
  g_opaque_and_union_3 = p3;
  g_opaque_and_union_4 = p4;
  g_opaque_and_union_5 = p5;
}

int volatile g_variadic_0;
double volatile g_variadic_1;
struct ii volatile g_variadic_2;
int r_variadic;
int variadic(int p0, double p1, struct ii p2, ...) {
  g_variadic_0 = p0;
  g_variadic_1 = p1;
  g_variadic_2 = p2;
  return r_variadic;
}

long volatile g_ret_int_0;
int r_ret_int;
int ret_int(long p0) {
  g_ret_int_0 = p0;
  return r_ret_int;
}

char r_ret_char;
char ret_char(void) {
  return r_ret_char;
}

_Bool r_ret_bool;
_Bool ret_bool(void) {
  return r_ret_bool;
}

int volatile g_ret_ptr_0;
char * r_ret_ptr;
char *ret_ptr(int p0) {
  g_ret_ptr_0 = p0;
  return r_ret_ptr;
}

double volatile g_ret_double_0;
int volatile g_ret_double_1;
double r_ret_double;
double ret_double(double p0, int p1) {
  g_ret_double_0 = p0;
  g_ret_double_1 = p1;
  return r_ret_double;
}

float r_ret_float;
float ret_float(void) {
  return r_ret_float;
}

struct ii r_ret_ii;
struct ii ret_ii(void) {
  return r_ret_ii;
}

struct dd r_ret_dd;
struct dd ret_dd(void) {
  return r_ret_dd;
}

struct dl r_ret_dl;
struct dl ret_dl(void) {
  return r_ret_dl;
}

struct ld_ r_ret_ld;
struct ld_ ret_ld(void) {
  return r_ret_ld;
}

struct fi r_ret_fi;
struct fi ret_fi(void) {
  return r_ret_fi;
}

struct if_ r_ret_if;
struct if_ ret_if(void) {
  return r_ret_if;
}

struct ff r_ret_ff;
struct ff ret_ff(void) {
  return r_ret_ff;
}

struct fd r_ret_fd;
struct fd ret_fd(void) {
  return r_ret_fd;
}

struct f3 r_ret_f3;
struct f3 ret_f3(void) {
  return r_ret_f3;
}

struct f4 r_ret_f4;
struct f4 ret_f4(void) {
  return r_ret_f4;
}

struct s12 r_ret_s12;
struct s12 ret_s12(void) {
  return r_ret_s12;
}

struct l2 r_ret_l2;
struct l2 ret_l2(void) {
  return r_ret_l2;
}

struct one_d r_ret_one_d;
struct one_d ret_one_d(void) {
  return r_ret_one_d;
}

__int128 r_ret_int128;
__int128 ret_int128(void) {
  return r_ret_int128;
}

int volatile g_ret_big_0;
long volatile g_ret_big_1;
double volatile g_ret_big_2;
struct big r_ret_big;
struct big ret_big(int p0, long p1, double p2) {
  g_ret_big_0 = p0;
  g_ret_big_1 = p1;
  g_ret_big_2 = p2;
  return r_ret_big;
}

int volatile g_ret_d3_0;
double volatile g_ret_d3_1;
struct d3 r_ret_d3;
struct d3 ret_d3(int p0, double p1) {
  g_ret_d3_0 = p0;
  g_ret_d3_1 = p1;
  return r_ret_d3;
}

int volatile g_ret_long_double_0;
double volatile g_ret_long_double_1;
long double r_ret_long_double;
long double ret_long_double(int p0, double p1) {
  g_ret_long_double_0 = p0;
  g_ret_long_double_1 = p1;
  return r_ret_long_double;
}

int volatile g_ret_complex_0;
double volatile g_ret_complex_1;
_Complex double r_ret_complex;
_Complex double ret_complex(int p0, double p1) {
  g_ret_complex_0 = p0;
  g_ret_complex_1 = p1;
  return r_ret_complex;
}

int volatile g_ret_opq_0;
struct opq r_ret_opq;
struct opq ret_opq(int p0) {
  g_ret_opq_0 = p0;
  return r_ret_opq;
}

int volatile g_ret_union_0;
union uf r_ret_union;
union uf ret_union(int p0) {
  g_ret_union_0 = p0;
  return r_ret_union;
}

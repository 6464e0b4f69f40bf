/* SPDX-License-Identifier: MIT */
/* Calls the loader through its own PLT, as a library that loads plugins
 * does. Sanitizer runtimes define dlopen in the executable itself, which
 * then calls it directly, without a GOT slot to redirect. Its RUNPATH
 * names the directory of the dlw fixture, for the bare-name test. */
#include <dlfcn.h>

void* dlw_caller_dlopen(const char* file, int mode) { return dlopen(file, mode); }
int dlw_caller_dlclose(void* handle) { return dlclose(handle); }

// SPDX-License-Identifier: MIT
// Linked into every shared object of ftjit that carries its own copy of
// libstdc++ (the agent, the built-in plugins: -static-libstdc++, so that a
// traced C program is left without libstdc++ once they are unloaded).
// That copy allocates its exception-handling emergency pool (about 71 KiB)
// when it starts; nothing frees it, so each load and unload of the object
// lost that much of the traced process's heap. __gnu_cxx::__freeres frees
// it, when the object is unloaded (or the process exits).
namespace __gnu_cxx {
void __freeres();
}

namespace {
__attribute__((destructor)) void ftjit_free_static_runtime() { __gnu_cxx::__freeres(); }
}  // namespace

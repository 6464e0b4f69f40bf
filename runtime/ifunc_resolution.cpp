// SPDX-License-Identifier: MIT
#include "runtime/ifunc_resolution.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/filter.h"
#include "core/ifunc_slots.h"
#include "core/module_relocator.h"
#include "runtime/module_scan.h"

namespace ftjit {
namespace {

// Each module file's IRELATIVE slots, read once: an attach after the first
// costs no file read.
std::shared_ptr<const std::vector<IrelativeSlot>> slots_of(const std::string& read_path, const ElfImage& image,
                                                           uint32_t type) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const std::vector<IrelativeSlot>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& entry = cache[read_path];
  if (entry == nullptr) {
    std::vector<IrelativeSlot> slots;
    if (auto bytes = read_file_bytes(read_path)) {
      if (auto found = irelative_slots(*bytes, image, type)) slots = std::move(found.value());
    }
    entry = std::make_shared<const std::vector<IrelativeSlot>>(std::move(slots));
  }
  return entry;
}

bool in_segment(const ElfImage& image, uint64_t link, uint64_t size) {
  for (const ElfImage::Segment& seg : image.load_segments())
    if (link >= seg.vaddr && link - seg.vaddr <= seg.memsz && seg.memsz - (link - seg.vaddr) >= size) return true;
  return false;
}

bool in_code_of(const ElfImage& image, uint64_t link) {
  for (const ElfImage::Segment& seg : image.load_segments())
    if ((seg.flags & PF_X) != 0 && link >= seg.vaddr && link - seg.vaddr < seg.memsz) return true;
  return false;
}

}  // namespace

Result<IfuncImplementation> ifunc_implementation(const std::string& path, const std::string& read_path,
                                                 uint64_t load_bias, const ElfImage& image, const ElfSymbol& ifunc,
                                                 uint32_t irelative_type) {
  IfuncImplementation out;
  std::string how;
  const auto slots = slots_of(read_path, image, irelative_type);
  // Every slot of one resolver holds the same value once the loader ran;
  // the first one that does is taken.
  for (const IrelativeSlot& s : irelative_slots_of(*slots, ifunc.value)) {
    // Only a word the module maps is read (the file says where; it could
    // say anything).
    if (!in_segment(image, s.word, sizeof(uint64_t))) continue;
    uint64_t word;
    std::memcpy(&word, reinterpret_cast<const void*>(s.word + load_bias), sizeof word);
    if (word == 0 || word == ifunc.value + load_bias) continue;
    out.address = word;
    how = "from its IRELATIVE word";
    break;
  }
  if (out.address == 0) {
    // No slot (the module never calls it itself): ask the loader, which
    // runs the resolver as for any caller of dlsym, in the module's own
    // scope (a handle from dlopen: a module loaded at startup has no
    // scope of its own until then). dlopen and dlclose are called through
    // the loader's own addresses: ftjit's redirection of them
    // (dlopen_watch) would call back into the engine, which is busy here.
    using DlopenFn = void* (*)(const char*, int);
    using DlcloseFn = int (*)(void*);
    static const auto real_dlopen = reinterpret_cast<DlopenFn>(dlsym(RTLD_DEFAULT, "dlopen"));
    static const auto real_dlclose = reinterpret_cast<DlcloseFn>(dlsym(RTLD_DEFAULT, "dlclose"));
    if (real_dlopen == nullptr || real_dlclose == nullptr)
      return make_error(FTJIT_E_NOT_PATCHABLE, "no IRELATIVE word, and the loader's dlopen cannot be found");
    void* handle = real_dlopen(read_path == path ? path.c_str() : nullptr, RTLD_NOLOAD | RTLD_LAZY);
    if (handle == nullptr)
      return make_error(FTJIT_E_NOT_PATCHABLE, "no IRELATIVE word, and the loader does not know " + path);
    void* p = dlsym(handle, std::string(ifunc.name).c_str());
    real_dlclose(handle);
    if (p == nullptr) return make_error(FTJIT_E_NOT_PATCHABLE, "no IRELATIVE word, and dlsym does not resolve it");
    out.address = reinterpret_cast<uint64_t>(p);
    how = "from dlsym";
  }
  std::string name;
  if (in_code_of(image, out.address - load_bias)) {
    out.path = path;
    out.load_bias = load_bias;
    name = ifunc_implementation_name(image, out.address - load_bias, ifunc.name);
  } else {
    // Another module's code (a resolver may return any function).
    Dl_info info;
    link_map* lm = nullptr;
    if (dladdr1(reinterpret_cast<const void*>(out.address), &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) == 0 ||
        lm == nullptr)
      return make_error(FTJIT_E_NOT_PATCHABLE, "its implementation at " + format_hex(out.address) + " lies in no module");
    // The vDSO (x86-64's time and gettimeofday resolve there) has no file
    // to prove anything from.
    if (lm->l_name != nullptr && lm->l_name[0] != '\0' && std::strchr(lm->l_name, '/') == nullptr)
      return make_error(FTJIT_E_NOT_PATCHABLE, std::string("its implementation lies in ") + lm->l_name +
                                                   ", which has no file");
    out.path = lm->l_name != nullptr && lm->l_name[0] != '\0' ? lm->l_name : self_exe_path();
    out.load_bias = lm->l_addr;
    name = info.dli_sname != nullptr && reinterpret_cast<uint64_t>(info.dli_saddr) == out.address
               ? info.dli_sname
               : std::string(ifunc.name) + " implementation";
  }
  out.describe = name + " (" + std::string(path_basename(out.path)) + "+" + format_hex(out.address - out.load_bias) +
                 "), " + how;
  return out;
}

}  // namespace ftjit

// SPDX-License-Identifier: MIT
// Module scanning: maps ELF files read-only (runtime/file_mapping.h) and walks the loader's list with dl_iterate_phdr.
#include "runtime/module_scan.h"

#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <utility>

#include "core/bulk_prefault.h"
#include "core/elf_image.h"
#include "core/elf_section_probe.h"
#include "core/module_file.h"
#include "core/register_evidence.h"
#include "core/site_discovery.h"
#include "core/sled_recovery.h"
#include "runtime/file_mapping.h"
#include "runtime/log.h"

namespace ftjit {
namespace {

constexpr const char* kSelfExe = "/proc/self/exe";

// From this size on a module file with records is worth a prefault helper
// (core/bulk_prefault.h): a module of a million sites is a 137 MB file
// here, one of 20,000 a 3 MB one.
constexpr size_t kPrefaultFileBytes = size_t{32} << 20;

std::mutex g_reader_mu;
ProducerReader g_reader;  // guarded by g_reader_mu

// The producers of a module with sites, from whoever reads DWARF for this
// process; a file without .debug_info costs no question.
Result<std::vector<CompileUnitProducer>> read_producers(const FileMapping& file, const ElfImage& image,
                                                        const std::string& read_path,
                                                        const std::string& report_path) {
  bool has_info = false;
  for (const ElfImage::DebugSection& d : image.debug_sections()) has_info |= d.name == ".debug_info";
  if (!has_info) return std::vector<CompileUnitProducer>{};
  ProducerReader reader;
  {
    std::lock_guard<std::mutex> lock(g_reader_mu);
    reader = g_reader;
  }
  if (!reader) return make_error(FTJIT_E_UNSUPPORTED, "nothing reads DWARF for this process");
  ModuleFile module{report_path, file.bytes().size(), file_fingerprint(file.bytes())};
  return reader(module, read_path);
}

// Reads read_path, reports report_path: the two differ for the main
// executable, whose name may be unreachable while /proc/self/exe is not.
Result<DiscoveredModule> discover_path(const std::string& read_path,
                                       const std::string& report_path, uint64_t load_bias) {
  // Most loaded objects have no records: known from their section names,
  // they are not mapped at all (core/elf_section_probe.h).
  if (const int fd = ::open(read_path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    const SectionProbe probe = probe_elf_section(fd, kPatchableSectionName);
    ::close(fd);
    if (probe.state == SectionProbe::kAbsent) {
      DiscoveredModule module;
      module.path = report_path;
      module.load_bias = load_bias;
      module.isa = probe.isa;
      return module;
    }
  }
  auto mapped = FileMapping::open(read_path);
  if (!mapped.ok()) {
    Error e = mapped.take_error();
    if (read_path != report_path) e.message = report_path + " (via " + e.message + ")";
    return e;
  }
  const std::shared_ptr<const FileMapping> file = std::move(mapped.value());
  // A file this large with records builds arrays of tens of MB: have
  // them faulted in beside the parse (when a scope asks for it).
  if (file->bytes().size() >= kPrefaultFileBytes) bulk_prefault_start();
  auto img = ElfImage::parse_for_sites(file->bytes(), file);
  if (!img.ok()) {
    Error e = img.take_error();
    e.message = report_path + ": " + e.message;
    return e;
  }
  auto module = discover_sites(img.value(), report_path, load_bias);
  if (!module || !module->has_patchable_section) return module;
  // One read of the producers serves both: what recovery takes as
  // evidence and what the trampolines must keep.
  const auto units = read_producers(*file, img.value(), read_path, report_path);
  recover_unrecorded_sites(file->bytes(), img.value(),
                           units ? units.value() : std::vector<CompileUnitProducer>{}, *module);
  if (module->recovered_sites != 0) log().debug("ftjit: {}: {}", report_path, module->recovery_why);
  if (!module->sites.empty()) {
    const SavesEvidence evidence = saves_evidence(units);
    module->saves_abi_is_enough = evidence.abi_is_enough;
    module->saves_why = evidence.why;
  }
  return module;
}


struct LoadedObject {
  std::string name;  // empty for the main executable
  uint64_t load_bias;
};

// The vDSO's program headers sit inside the image whose ELF header the
// kernel passes as AT_SYSINFO_EHDR; its loader name is not a file.
bool is_vdso(const dl_phdr_info* info) {
  const unsigned long ehdr_addr = ::getauxval(AT_SYSINFO_EHDR);
  if (ehdr_addr == 0) return false;
  const auto* ehdr = reinterpret_cast<const ElfW(Ehdr)*>(ehdr_addr);
  return reinterpret_cast<uintptr_t>(info->dlpi_phdr) == ehdr_addr + ehdr->e_phoff;
}

int collect_object(dl_phdr_info* info, size_t, void* data) {
  auto* objects = static_cast<std::vector<LoadedObject>*>(data);
  const bool first = objects->empty();
  const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  // Only the first object may be nameless: it is the main executable.
  // Later nameless ones (and the vDSO) have no file to read.
  if (!is_vdso(info) && (first || name[0] != '\0')) {
    objects->push_back({first ? std::string() : std::string(name), info->dlpi_addr});
  }
  return 0;
}

int read_generation(dl_phdr_info* info, size_t size, void* data) {
  // dlpi_adds/dlpi_subs are a later addition to the struct; size tells
  // whether this loader fills them in.
  if (size < offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return 1;
  *static_cast<uint64_t*>(data) = info->dlpi_adds + info->dlpi_subs;
  return 1;  // every object carries the same counters: one is enough
}

std::atomic<uint64_t> g_scan_micros{0};

// Adds the lifetime of one scan to g_scan_micros.
class ScanTimer {
 public:
  ~ScanTimer() {
    g_scan_micros.fetch_add(std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - start_)
                                .count(),
                            std::memory_order_relaxed);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

void set_producer_reader(ProducerReader reader) {
  std::lock_guard<std::mutex> lock(g_reader_mu);
  g_reader = std::move(reader);
}

std::string self_exe_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(kSelfExe, buf, sizeof buf - 1);
  if (n <= 0) return kSelfExe;
  return std::string(buf, static_cast<size_t>(n));
}

uint64_t module_scan_micros() { return g_scan_micros.load(std::memory_order_relaxed); }

Result<DiscoveredModule> discover_file(const std::string& path, uint64_t load_bias) {
  ScanTimer timer;
  return discover_path(path, path, load_bias);
}

Result<std::vector<DiscoveredModule>> discover_loaded_modules() {
  ScanTimer timer;
  // Files are read after the walk, not inside the callback, which runs with
  // the loader lock held and would block dlopen in other threads.
  std::vector<LoadedObject> objects;
  ::dl_iterate_phdr(collect_object, &objects);

  std::vector<DiscoveredModule> modules;
  modules.reserve(objects.size());
  for (const auto& obj : objects) {
    const bool main_exe = obj.name.empty();
    const std::string report = main_exe ? self_exe_path() : obj.name;
    auto module = discover_path(main_exe ? kSelfExe : obj.name, report, obj.load_bias);
    if (module.ok()) {
      modules.push_back(std::move(module.value()));
    } else {
      DiscoveredModule unreadable;
      unreadable.path = report;
      unreadable.load_bias = obj.load_bias;
      modules.push_back(std::move(unreadable));
    }
  }
  return modules;
}

uint64_t loaded_modules_generation() {
  uint64_t generation = 0;
  ::dl_iterate_phdr(read_generation, &generation);
  return generation;
}

}  // namespace ftjit

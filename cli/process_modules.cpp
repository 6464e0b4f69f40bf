// SPDX-License-Identifier: MIT
// process_modules: another process's modules and their sites, from /proc/PID/maps and the files.
#include "cli/process_modules.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/module_producers.h"
#include "core/filter.h"
#include "core/sled_recovery.h"

namespace ftjit::cli {

namespace {

struct MappedModule {
  std::string path;   // as the process sees it
  uint64_t base = 0;  // lowest address mapping file offset 0
};

// Every file of `pid` with an executable mapping (or, with `any_mapping`,
// any mapping of its start), in the order of /proc/PID/maps.
Result<std::vector<MappedModule>> executable_files(pid_t pid, bool any_mapping = false) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream maps(proc + "/maps");
  if (!maps) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
  // Per file: the lowest mapping of file offset 0 (its load address), and
  // whether any mapping of it is executable.
  struct Seen {
    uint64_t base = UINT64_MAX;
    bool exec = false;
  };
  std::map<std::string, Seen> files;
  std::vector<std::string> order;
  std::string line;
  while (std::getline(maps, line)) {
    // start-end perms offset dev inode path
    uint64_t start, end, offset;
    char perms[8];
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %n", &start,
                    &end, perms, &offset, &consumed) < 4 || consumed == 0) {
      continue;
    }
    std::string path = line.substr(static_cast<size_t>(consumed));
    if (path.empty() || path[0] != '/' || path.find(" (deleted)") != std::string::npos) continue;
    auto [it, fresh] = files.try_emplace(path);
    if (fresh) order.push_back(path);
    if (offset == 0 && start < it->second.base) it->second.base = start;
    if (perms[2] == 'x') it->second.exec = true;
  }
  std::vector<MappedModule> out;
  for (const std::string& path : order) {
    const Seen& s = files[path];
    if ((s.exec || any_mapping) && s.base != UINT64_MAX) out.push_back({path, s.base});
  }
  return out;
}

// visit(the module, its path under the process's root, its file, its
// image parsed for sites) for each executable file of `pid` that opens and
// parses, in the order of its maps, until visit returns true: then true.
// Fails only if /proc/PID/maps cannot be read.
template <typename Visit>
Result<bool> any_parsed_file(pid_t pid, Visit visit) {
  auto files = executable_files(pid);
  if (!files) return files.take_error();
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  for (const MappedModule& m : *files) {
    auto file = std::make_shared<MappedFile>();
    std::string error;
    if (!file->open(root + m.path, &error)) continue;
    auto image = ElfImage::parse_for_sites(file->bytes(), file);
    if (image && visit(m, root + m.path, *file, *image)) return true;
  }
  return false;
}

}  // namespace

Result<bool> process_has_patchable_entries(pid_t pid) {
  auto any = any_parsed_file(pid, [](const MappedModule&, const std::string&, const MappedFile&,
                                     const ElfImage& image) { return !image.patchable_records().empty(); });
  if (!any) return any.take_error();
  if (*any) return true;
  // No record anywhere: a module may still have sites recovered without
  // one (core/sled_recovery.h: its records zeroed, its producers naming
  // the flag). Only then is every module discovered in full.
  auto modules = process_modules(pid);
  if (!modules) return modules.take_error();
  for (const ProcessModule& m : *modules) {
    if (!m.found.sites.empty()) return true;
  }
  return false;
}

std::vector<control::ModuleProducers> module_producers_ahead(pid_t pid) {
  std::vector<control::ModuleProducers> out;
  (void)any_parsed_file(pid, [&](const MappedModule& m, const std::string& path, const MappedFile& file,
                                 const ElfImage& image) {
    if (!image.has_patchable_section()) return false;
    bool has_info = false;
    for (const ElfImage::DebugSection& d : image.debug_sections()) has_info |= d.name == ".debug_info";
    if (!has_info) return false;  // the agent asks nothing of such a file
    auto units = read_producers(path);
    if (units) {
      out.push_back({ModuleFile{m.path, file.bytes().size(), file_fingerprint(file.bytes())}, std::move(*units)});
    }
    return false;
  });
  return out;
}

Result<std::vector<ProcessModule>> process_modules(pid_t pid, bool guest_code) {
  auto files = executable_files(pid, guest_code);
  if (!files) return files.take_error();
  const std::string proc = "/proc/" + std::to_string(pid);
  std::vector<ProcessModule> out;
  const long page = sysconf(_SC_PAGESIZE);
  for (const MappedModule& mapped : *files) {
    const std::string& path = mapped.path;
    auto file = std::make_shared<MappedFile>();
    std::string error;
    if (!file->open(proc + "/root" + path, &error)) continue;
    auto image = ElfImage::parse_for_sites(file->bytes(), file);
    if (!image || image->load_segments().empty()) continue;
    uint64_t first_vaddr = image->load_segments().front().vaddr & ~static_cast<uint64_t>(page - 1);
    ProcessModule m;
    m.path = path;
    m.load_bias = mapped.base - first_vaddr;
    auto found = discover_sites(*image, path, m.load_bias);
    if (!found) continue;
    if (found->has_patchable_section) {
      auto units = read_producers(proc + "/root" + path);
      recover_unrecorded_sites(file->bytes(), *image,
                               units ? units.value() : std::vector<CompileUnitProducer>{}, *found);
    }
    m.found = std::move(found.value());
    m.file = std::move(file);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> recovered_site_notes(pid_t pid) {
  std::vector<std::string> notes;
  auto modules = process_modules(pid);
  if (!modules) return notes;
  for (const ProcessModule& m : *modules) {
    if (m.found.recovered_sites == 0) continue;
    notes.push_back(std::string(path_basename(m.path)) + ": " + m.found.recovery_why);
  }
  return notes;
}

}  // namespace ftjit::cli

// SPDX-License-Identifier: MIT
// `ftjit list FILE`: the patchable functions of an executable or shared
// object, one per line: link-time entry address, layout, demangled name.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/elf_image.h"
#include "core/filter.h"
#include "core/site_discovery.h"

namespace ftjit::cli {

namespace {

struct ListOptions {
  std::string file;
  std::vector<std::string> include, exclude;
};

// The file, mapped read-only for the parser.
class MappedFile {
 public:
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  bool open(const std::string& path, std::string* error) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *error = "cannot open " + path + ": " + std::strerror(errno);
      return false;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
      *error = path + " is not a regular, non-empty file";
      ::close(fd);
      return false;
    }
    size_ = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      *error = "cannot map " + path + ": " + std::strerror(errno);
      return false;
    }
    data_ = p;
    return true;
  }
  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(data_), size_};
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

int run_list(const ListOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit list: %s\n", message.c_str());
    return 1;
  };
  auto filter = Filter::compile(o.include, o.exclude);
  if (!filter) return fail(filter.error().message);
  MappedFile file;
  std::string error;
  if (!file.open(o.file, &error)) return fail(error);
  auto image = ElfImage::parse(file.bytes());
  if (!image) return fail(o.file + ": " + image.error().message);
  auto module = discover_sites(*image, o.file, 0);
  if (!module) return fail(o.file + ": " + module.error().message);
  if (!module->has_patchable_section || module->sites.empty()) {
    return fail(o.file + " has no patchable function entries (build it with "
                         "-fpatchable-function-entry=5, or =13,8 for call-ops)");
  }
  const std::string base(path_basename(o.file));
  size_t shown = 0;
  for (const DiscoveredSite& s : module->sites) {
    if (!filter->matches(base, s.name, s.demangled)) continue;
    const char* name = s.demangled.empty() ? "?" : s.demangled.c_str();
    std::printf("%#" PRIx64 "\t%s\t%s\n", s.entry, s.prefix_bytes >= 8 ? "slot" : "entry", name);
    ++shown;
  }
  if (shown == 0) {
    return fail("no patchable function of " + o.file + " matches " + filter->describe());
  }
  std::fprintf(stderr, "%zu of %zu patchable functions (%s, %s)\n", shown,
               module->sites.size(), base.c_str(), isa_name(module->isa));
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ListOptions>();
  CLI::App* cmd = app.add_subcommand(
      "list", "List the patchable functions of an ELF file: ADDRESS<TAB>LAYOUT<TAB>NAME");
  cmd->add_option("FILE", o->file, "Executable or shared object")->required();
  cmd->add_option("--filter", o->include, "Only functions matching GLOB (MODULE!GLOB), repeatable")
      ->type_name("GLOB");
  cmd->add_option("--exclude", o->exclude, "Leave out functions matching GLOB, repeatable")
      ->type_name("GLOB");
  cmd->footer("LAYOUT is 'slot' for -fpatchable-function-entry=13,8 (the 8-byte ops slot "
              "call-ops needs), 'entry' for =5.");
  cmd->callback([run, o] { *run = [o] { return run_list(*o); }; });
}

}  // namespace ftjit::cli

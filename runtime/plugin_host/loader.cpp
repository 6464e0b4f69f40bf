// SPDX-License-Identifier: MIT
// Finding plugins on the search path, dlopening them, and checking every
// field of a descriptor before the host relies on any of it.
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "runtime/plugin_host/host_internal.h"

#ifndef FTJIT_PLUGIN_BUILD_DIR
#error "FTJIT_PLUGIN_BUILD_DIR must be defined by the build"
#endif
#ifndef FTJIT_PLUGIN_INSTALL_DIR
#error "FTJIT_PLUGIN_INSTALL_DIR must be defined by the build"
#endif

namespace ftjit::plugins {

namespace detail {

namespace {

constexpr std::string_view kFilePrefix = "ftjit-plugin-";
constexpr std::string_view kFileSuffix = ".so";
// The descriptor size of ABI 1; later versions may only append.
// ABI 1 as first published; inline_work was appended after it.
constexpr uint32_t kDescriptorSizeV1 = offsetof(ftjit_plugin, inline_work);
constexpr uint32_t kKnownFlags = FTJIT_PLUGIN_F_NO_FP | FTJIT_PLUGIN_F_ARGS | FTJIT_PLUGIN_F_EVERY_CALL;
// Limits that catch garbage in a descriptor before it becomes a huge mmap.
constexpr uint32_t kMaxThreadStorage = 16u << 20;
constexpr uint32_t kMaxEventSize = 64u << 10;
constexpr uint32_t kMaxBufferEvents = 1u << 24;
constexpr uint32_t kMaxOptions = 256;
constexpr uint32_t kMaxFormats = 32;

Error load_error(const std::string& who, const std::string& why) {
  return make_error(FTJIT_E_INVALID_ARGUMENT, who + ": " + why);
}

std::string spec_label(const PluginSpec& spec, const std::string& path) {
  if (spec.is_path()) return "plugin '" + path + "'";
  return "plugin '" + spec.name + "' (" + path + ")";
}

// dlopen's message for a non-ELF file is obscure ("invalid ELF header" at
// best); checking the header first gives the user the plain cause.
Status check_elf_file(const std::string& who, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return load_error(who, e == ENOENT ? "no such file" : std::string("cannot open: ") + std::strerror(e));
  }
  Elf64_Ehdr eh{};
  ssize_t n = ::read(fd, &eh, sizeof eh);
  ::close(fd);
  if (n < static_cast<ssize_t>(EI_NIDENT) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return load_error(who, "not an ELF file");
  }
  if (n < static_cast<ssize_t>(sizeof eh) || eh.e_type != ET_DYN) {
    return load_error(who, "not an ELF shared object");
  }
  return {};
}

Status check_options(const std::string& who, const ftjit_plugin* d) {
  if (d->n_options == 0) return {};
  if (d->options == nullptr) return load_error(who, "declares options but gives none (options is NULL)");
  if (d->n_options > kMaxOptions) {
    return load_error(who, "declares " + std::to_string(d->n_options) + " options (at most " +
                               std::to_string(kMaxOptions) + ")");
  }
  for (uint32_t i = 0; i < d->n_options; ++i) {
    const ftjit_plugin_option& o = d->options[i];
    if (o.name == nullptr || !valid_name(o.name)) {
      return load_error(who, "option #" + std::to_string(i) + " has an invalid name '" +
                                 (o.name ? o.name : "(null)") + "' (wants [a-z0-9_-]+)");
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (std::strcmp(d->options[j].name, o.name) == 0) {
        return load_error(who, std::string("option '") + o.name + "' is declared twice");
      }
    }
    if (o.type < FTJIT_OPTION_BOOL || o.type > FTJIT_OPTION_STRING) {
      return load_error(who, std::string("option '") + o.name + "' has an unknown type " +
                                 std::to_string(static_cast<int>(o.type)));
    }
    if (o.default_value != nullptr) {
      auto v = parse_option_value(o.type, o.default_value);
      if (!v) {
        return load_error(who, std::string("default of option '") + o.name + "' " +
                                   v.error().message);
      }
    }
  }
  return {};
}

Status check_formats(const std::string& who, const ftjit_plugin* d) {
  if (d->formats == nullptr) {
    if (d->report != nullptr) return load_error(who, "has a report callback but no formats");
    return {};
  }
  uint32_t n = 0;
  for (; d->formats[n] != nullptr; ++n) {
    if (n == kMaxFormats) return load_error(who, "formats list is not NULL-terminated");
    if (!valid_name(d->formats[n])) {
      return load_error(who, std::string("format '") + d->formats[n] + "' is not a valid name");
    }
  }
  if (n == 0 && d->report != nullptr) return load_error(who, "has a report callback but no formats");
  return {};
}

Status check_inline(const std::string& who, const ftjit_plugin* d) {
  const ftjit_plugin_inline* w = plugin_inline_work(d);
  if (w == nullptr) return {};
  if (w->struct_size < sizeof(ftjit_plugin_inline) || w->version != FTJIT_PLUGIN_INLINE_VERSION) {
    return load_error(who, "inline work of struct_size " + std::to_string(w->struct_size) + ", version " +
                               std::to_string(w->version) + ": this host reads version " +
                               std::to_string(FTJIT_PLUGIN_INLINE_VERSION) + " (struct_size " +
                               std::to_string(sizeof(ftjit_plugin_inline)) + ")");
  }
  if (w->entry != FTJIT_PLUGIN_INLINE_NONE && w->entry != FTJIT_PLUGIN_INLINE_COUNT &&
      w->entry != FTJIT_PLUGIN_INLINE_LATENCY) {
    return load_error(who, "inline work asks for entry action " + std::to_string(w->entry) +
                               ", which this host does not know (it compiles: 1 = count, 2 = latency)");
  }
  if (w->exit != FTJIT_PLUGIN_INLINE_NONE && w->exit != FTJIT_PLUGIN_INLINE_LATENCY) {
    return load_error(who, "inline work asks for exit action " + std::to_string(w->exit) +
                               ", which this host does not know (it compiles: 2 = latency)");
  }
  if ((w->entry == FTJIT_PLUGIN_INLINE_LATENCY) != (w->exit == FTJIT_PLUGIN_INLINE_LATENCY)) {
    return load_error(who, "inline latency is one action at both ends: entry and exit must both "
                           "be FTJIT_PLUGIN_INLINE_LATENCY");
  }
  if (w->entry != FTJIT_PLUGIN_INLINE_NONE && d->entry == nullptr) {
    return load_error(who, "inline work at entries needs an entry callback too, for the sites "
                           "and calls it is not compiled for");
  }
  if (w->entry == FTJIT_PLUGIN_INLINE_COUNT && d->exit != nullptr) {
    return load_error(who, "inline count conflicts with its exit callback: hooked "
                           "returns need the callback at every site");
  }
  if (w->entry == FTJIT_PLUGIN_INLINE_LATENCY && d->exit == nullptr) {
    return load_error(who, "inline latency needs an exit callback too, for the sites and calls "
                           "it is not compiled for");
  }
  return {};
}

Status check_descriptor(const std::string& who, const ftjit_plugin* d) {
  if (d == nullptr) return load_error(who, "ftjit_plugin_v1 returned NULL (no descriptor)");
  if (d->abi_version != FTJIT_PLUGIN_ABI_VERSION) {
    return load_error(who, "built for plugin ABI " + std::to_string(d->abi_version) +
                               ", this host speaks " + std::to_string(FTJIT_PLUGIN_ABI_VERSION));
  }
  if (d->struct_size < kDescriptorSizeV1) {
    return load_error(who, "descriptor struct_size " + std::to_string(d->struct_size) +
                               " is smaller than ABI 1's " + std::to_string(kDescriptorSizeV1));
  }
  if (d->name == nullptr || !valid_name(d->name)) {
    return load_error(who, std::string("invalid plugin name '") + (d->name ? d->name : "(null)") +
                               "' (wants [a-z0-9_-]+, at most 64)");
  }
  if ((d->flags & ~kKnownFlags) != 0) {
    return load_error(who, "unknown flags 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%x", d->flags & ~kKnownFlags);
      return std::string(buf);
    }());
  }
  if (d->entry == nullptr && d->exit == nullptr) {
    return load_error(who, "has neither an entry nor an exit callback");
  }
  if (d->event_size > 0 && d->consume == nullptr) {
    return load_error(who, "declares event_size but no consume callback");
  }
  if (d->thread_storage_size > kMaxThreadStorage) {
    return load_error(who, "thread_storage_size " + std::to_string(d->thread_storage_size) +
                               " is over the limit " + std::to_string(kMaxThreadStorage));
  }
  if (d->event_size > kMaxEventSize) {
    return load_error(who, "event_size " + std::to_string(d->event_size) + " is over the limit " +
                               std::to_string(kMaxEventSize));
  }
  if (d->buffer_events > kMaxBufferEvents) {
    return load_error(who, "buffer_events " + std::to_string(d->buffer_events) +
                               " is over the limit " + std::to_string(kMaxBufferEvents));
  }
  FTJIT_TRY(check_options(who, d));
  FTJIT_TRY(check_formats(who, d));
  FTJIT_TRY(check_inline(who, d));
  return {};
}

}  // namespace

Library& Library::operator=(Library&& o) noexcept {
  if (this != &o) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = o.handle_;
    o.handle_ = nullptr;
  }
  return *this;
}

Library::~Library() {
  if (handle_ != nullptr) dlclose(handle_);
}

Result<std::string> resolve_plugin_path(const PluginSpec& spec) {
  if (spec.is_path()) return spec.name;
  std::string file = std::string(kFilePrefix) + spec.name + std::string(kFileSuffix);
  std::string tried;
  for (const std::string& dir : plugin_search_path()) {
    std::string path = dir + "/" + file;
    if (::access(path.c_str(), F_OK) == 0) return path;
    tried += (tried.empty() ? "" : ", ") + dir;
  }
  return make_error(FTJIT_E_INVALID_ARGUMENT, "plugin '" + spec.name + "' not found: no " + file +
                                                  " in " + (tried.empty() ? "(empty search path)" : tried));
}

Result<LoadedPlugin> load_plugin(const PluginSpec& spec) {
  auto path = resolve_plugin_path(spec);
  if (!path) return path.take_error();
  LoadedPlugin p;
  p.path = std::move(path.value());
  p.label = spec_label(spec, p.path);
  FTJIT_TRY(check_elf_file(p.label, p.path));

  // dlopen searches the library path for a name without '/'; a user's
  // "x.so" means the file in the current directory.
  std::string open_path = p.path.find('/') == std::string::npos ? "./" + p.path : p.path;
  dlerror();
  void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return load_error(p.label, std::string("cannot be loaded: ") + (why ? why : "dlopen failed"));
  }
  p.library = Library(handle);
  auto entry = reinterpret_cast<ftjit_plugin_entry_point>(dlsym(handle, FTJIT_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    return load_error(p.label, "not an ftjit plugin (no " FTJIT_PLUGIN_ENTRY_SYMBOL " symbol)");
  }
  p.desc = entry(host_table());
  FTJIT_TRY(check_descriptor(p.label, p.desc));
  // From here on the descriptor's name is the one users know it by.
  if (spec.is_path()) p.label = std::string("plugin '") + p.desc->name + "' (" + p.path + ")";
  return p;
}

Result<std::vector<OptionValue>> resolve_options(const LoadedPlugin& plugin,
                                                 const PluginSpec& spec) {
  const ftjit_plugin* d = plugin.desc;
  std::vector<OptionValue> values;
  values.reserve(d->n_options);
  for (uint32_t i = 0; i < d->n_options; ++i) {
    const ftjit_plugin_option& o = d->options[i];
    // check_options parsed every default already.
    auto v = o.default_value ? parse_option_value(o.type, o.default_value)
                             : Result<OptionValue>(OptionValue{});
    OptionValue value = std::move(v.value());
    value.type = o.type;
    value.name = o.name;
    values.push_back(std::move(value));
  }
  for (const auto& [key, text] : spec.options) {
    auto it = std::find_if(values.begin(), values.end(),
                           [&](const OptionValue& v) { return v.name == key; });
    if (it == values.end()) {
      std::string known;
      for (const OptionValue& v : values) known += (known.empty() ? "" : ", ") + v.name;
      return make_error(FTJIT_E_INVALID_ARGUMENT,
                        plugin.label + ": unknown option '" + key + "' (" +
                            (known.empty() ? std::string("it has no options")
                                           : "known: " + known) + ")");
    }
    auto v = parse_option_value(it->type, text);
    if (!v) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "option '" + key + "' of plugin '" +
                                                      d->name + "' " + v.error().message);
    }
    std::string name = std::move(it->name);
    *it = std::move(v.value());
    it->name = std::move(name);
  }
  return values;
}

PluginInfo info_of(const LoadedPlugin& plugin) {
  const ftjit_plugin* d = plugin.desc;
  PluginInfo info;
  info.name = d->name;
  info.path = plugin.path;
  info.description = d->description ? d->description : "";
  for (uint32_t i = 0; i < d->n_options; ++i) {
    const ftjit_plugin_option& o = d->options[i];
    info.options.push_back(
        {o.name, o.type, o.default_value ? o.default_value : "", o.help ? o.help : ""});
  }
  for (uint32_t i = 0; d->formats != nullptr && d->formats[i] != nullptr; ++i) {
    info.formats.emplace_back(d->formats[i]);
  }
  info.hooks_exit = d->exit != nullptr;
  const ftjit_plugin_inline* work = plugin_inline_work(d);
  info.inline_count = work != nullptr && work->entry == FTJIT_PLUGIN_INLINE_COUNT;
  info.inline_latency = work != nullptr && work->entry == FTJIT_PLUGIN_INLINE_LATENCY;
  return info;
}

}  // namespace detail

std::vector<std::string> plugin_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("FTJIT_PLUGIN_PATH")) {
    std::string_view rest = env;
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(dir);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  // Beside an installed program (PREFIX/bin/ftjit finds PREFIX/lib/...),
  // wherever the prefix was moved to.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string exe(self, static_cast<size_t>(n));
    const size_t slash = exe.rfind('/');
    if (slash != std::string::npos) {
      dirs.push_back(exe.substr(0, slash) + "/../" FTJIT_PLUGIN_RELATIVE_DIR);
    }
  }
  dirs.emplace_back(FTJIT_PLUGIN_BUILD_DIR);
  dirs.emplace_back(FTJIT_PLUGIN_INSTALL_DIR);
  return dirs;
}

Result<std::vector<PluginInfo>> list_plugins() {
  using namespace detail;
  std::map<std::string, PluginInfo> found;  // by file name: the first dir wins
  std::vector<std::string> dirs = plugin_search_path();
  size_t readable = 0;
  for (const std::string& dir : dirs) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    ++readable;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string_view file = e->d_name;
      if (file.size() <= kFilePrefix.size() + kFileSuffix.size() ||
          file.substr(0, kFilePrefix.size()) != kFilePrefix ||
          file.substr(file.size() - kFileSuffix.size()) != kFileSuffix) {
        continue;
      }
      std::string name(file.substr(kFilePrefix.size(),
                                   file.size() - kFilePrefix.size() - kFileSuffix.size()));
      if (name.rfind("test-", 0) == 0 || found.count(name) != 0) continue;
      names.push_back(std::move(name));
    }
    ::closedir(d);
    for (const std::string& name : names) {
      PluginSpec spec{dir + "/" + std::string(kFilePrefix) + name + std::string(kFileSuffix), {}};
      auto p = load_plugin(spec);
      PluginInfo info;
      if (p) {
        info = info_of(*p);
      } else {
        info.name = name;
        info.path = spec.name;
        info.error = p.error().message;
      }
      found.emplace(name, std::move(info));
    }
  }
  if (readable == 0) {
    std::string all;
    for (const std::string& dir : dirs) all += (all.empty() ? "" : ", ") + dir;
    return make_error(FTJIT_E_SYSTEM, "no plugin directory can be read (searched " + all + ")");
  }
  std::vector<PluginInfo> out;
  for (auto& [name, info] : found) out.push_back(std::move(info));
  return out;
}

Result<PluginInfo> describe_plugin(const PluginSpec& spec) {
  auto p = detail::load_plugin(spec);
  if (!p) return p.take_error();
  return detail::info_of(*p);
}

Result<std::string> find_plugin_file(const PluginSpec& spec) {
  return detail::resolve_plugin_path(spec);
}

}  // namespace ftjit::plugins

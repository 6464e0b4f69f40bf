// SPDX-License-Identifier: MIT
// Shared by the built-in plugins (SDK only, header-only): the entry point's
// host check, the descriptor, option checks and allocation of the per-thread
// table pool in init, and report helpers. Not for the event path: include
// it from the lifecycle/report files, never from a *_events.cpp file (see
// event_support.h).
#ifndef FTJIT_PLUGINS_COMMON_PLUGIN_SUPPORT_H
#define FTJIT_PLUGINS_COMMON_PLUGIN_SUPPORT_H

#include <ftjit/plugin.h>

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>

#include "table_pool.h"

namespace ftjit_plugin_support {

// ---------------------------------------------------------------------------
// Entry point and descriptor
// ---------------------------------------------------------------------------

//! The body of ftjit_plugin_v1: keeps `host` in `g_host` and hands out the
//! descriptor, or nullptr for a host of another ABI.
inline const ftjit_plugin *accept_host(const ftjit_host *host,
                                       const ftjit_host *&g_host,
                                       const ftjit_plugin &descriptor) {
  if (host == nullptr || host->abi_version != FTJIT_PLUGIN_ABI_VERSION)
    return nullptr;
  g_host = host;
  return &descriptor;
}

//! What differs between the built-in plugins' descriptors.
struct DescriptorSpec {
  const char *name = nullptr;
  const char *description = nullptr;
  const ftjit_plugin_option *options = nullptr;
  uint32_t n_options = 0;
  const char *const *formats = nullptr;
  uint32_t thread_storage_size = 0;
  uint32_t event_size = 0;
  uint32_t buffer_events = 0;
  int (*init)(ftjit_plugin_ctx *) = nullptr;
  void (*shutdown)(ftjit_plugin_ctx *) = nullptr;
  ftjit_plugin_entry_fn entry = nullptr;
  ftjit_plugin_exit_fn exit = nullptr;
  void (*consume)(ftjit_plugin_ctx *, const ftjit_thread_info *,
                  const void *) = nullptr;
  int (*report)(ftjit_plugin_ctx *, FILE *, const char *) = nullptr;
  const ftjit_plugin_inline *inline_work = nullptr;
  uint32_t extra_flags = 0;  // FTJIT_PLUGIN_F_ARGS
  void (*consume_run)(ftjit_plugin_ctx *, const ftjit_thread_info *,
                      const void *, size_t, size_t) = nullptr;
};

//! The descriptor of a plugin of this ABI whose event path is built with
//! -mgeneral-regs-only (FTJIT_PLUGIN_F_NO_FP).
constexpr ftjit_plugin no_fp_descriptor(const DescriptorSpec &spec) {
  return {sizeof(ftjit_plugin),   FTJIT_PLUGIN_ABI_VERSION,
          spec.name,              spec.description,
          spec.options,           spec.n_options,
          FTJIT_PLUGIN_F_NO_FP | spec.extra_flags, spec.formats,
          spec.thread_storage_size, spec.event_size,
          spec.buffer_events,     0,
          spec.init,              spec.shutdown,
          spec.entry,             spec.exit,
          spec.consume,           spec.report,
          spec.inline_work,       spec.consume_run};
}

// ---------------------------------------------------------------------------
// Init and shutdown
// ---------------------------------------------------------------------------

//! The host size that has instance_data, process_id and process_name.
inline constexpr size_t kHostSizeNeeded =
    offsetof(ftjit_host, process_name) + sizeof(ftjit_host::process_name);

//! Whether the host lacks instance_data (and the process services); if so
//! sets init's error. The event path has no other way to find its instance.
inline bool host_too_old(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                         const char *plugin) {
  if (host->struct_size >= kHostSizeNeeded) return false;
  host->set_error(ctx,
                  "%s: the host is too old (ftjit_host of %u bytes, "
                  "need %zu: no instance data)",
                  plugin, host->struct_size, kHostSizeNeeded);
  return true;
}

constexpr bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

//! The pool's ceiling on max_threads, the same for every plugin.
inline constexpr int64_t kMaxPoolThreads = 65536;

//! The options `table_size` and `max_threads` every pooled plugin declares.
struct PoolOptions {
  int64_t table_size = 0;
  int64_t max_threads = 0;
};

//! Reads and checks table_size (a power of two, at most `max_table_size`)
//! and max_threads; false, with init's error set, if one is out of range.
inline bool read_pool_options(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                              const char *plugin, int64_t max_table_size,
                              PoolOptions *options) {
  options->table_size = host->option_int(ctx, "table_size");
  options->max_threads = host->option_int(ctx, "max_threads");
  if (!is_power_of_two(options->table_size) ||
      options->table_size > max_table_size) {
    host->set_error(ctx,
                    "%s: table_size must be a power of two in [1, %" PRId64
                    "], got %" PRId64,
                    plugin, max_table_size, options->table_size);
    return false;
  }
  if (options->max_threads < 1 || options->max_threads > kMaxPoolThreads) {
    host->set_error(ctx,
                    "%s: max_threads must be in [1, %" PRId64 "], got %" PRId64,
                    plugin, kMaxPoolThreads, options->max_threads);
    return false;
  }
  return true;
}

template <class Instance>
void delete_pool_instance(Instance *instance) {
  if (instance == nullptr) return;
  std::free(instance->entries);
  std::free(instance->headers);
  delete instance;
}

//! A new Instance (deriving from TablePool) with its pool of checked
//! `options` allocated: calloc, so that tables no thread claims stay
//! unbacked zero pages, and no thread allocates on its first event.
//! nullptr, with init's error set, if memory ran out; `entry_noun` names
//! what a table holds in that message.
template <class Instance>
Instance *new_pool_instance(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                            const char *plugin, const PoolOptions &options,
                            const char *entry_noun) {
  using Entry = typename Instance::EntryType;
  using Header = typename Instance::HeaderType;
  auto *instance = new (std::nothrow) Instance;
  if (instance == nullptr) {
    host->set_error(ctx, "%s: out of memory", plugin);
    return nullptr;
  }
  const int64_t table_size = options.table_size;
  const int64_t max_threads = options.max_threads;
  instance->table_size = uint32_t(table_size);
  instance->hash_shift =
      std::min(63u, 64 - uint32_t(__builtin_ctzll(uint64_t(table_size))));
  instance->load_limit =
      uint32_t(table_size - std::max<int64_t>(1, table_size / 4));
  instance->max_threads = uint32_t(max_threads);
  instance->entries = static_cast<Entry *>(
      std::calloc(size_t(max_threads) * size_t(table_size), sizeof(Entry)));
  instance->headers =
      static_cast<Header *>(std::calloc(size_t(max_threads), sizeof(Header)));
  if (instance->entries == nullptr || instance->headers == nullptr) {
    host->set_error(ctx,
                    "%s: cannot allocate %" PRId64 " tables of %" PRId64 " %s",
                    plugin, max_threads, table_size, entry_noun);
    delete_pool_instance(instance);
    return nullptr;
  }
  return instance;
}

//! The instance init gave the host, which no longer has it; nullptr if
//! init failed. For shutdown.
template <class Instance>
Instance *take_instance(const ftjit_host *host, ftjit_plugin_ctx *ctx) {
  auto *instance = static_cast<Instance *>(host->instance_data(ctx));
  if (instance != nullptr) host->set_instance_data(ctx, nullptr);
  return instance;
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

//! Whether `instance` is there to report on; if not sets report's error.
inline bool has_instance(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                         const char *plugin, const void *instance) {
  if (instance != nullptr) return true;
  host->set_error(ctx, "%s: report without a successful init", plugin);
  return false;
}

//! Runs `write` (which returns 0 or sets the error and returns 1), then
//! reports a failed allocation or write on `out` as report's error.
template <class Write>
int guarded_report(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                   const char *plugin, FILE *out, Write &&write) {
  try {
    if (write() != 0) return 1;
  } catch (const std::bad_alloc &) {
    host->set_error(ctx, "%s: out of memory while reporting", plugin);
    return 1;
  }
  if (!std::ferror(out)) return 0;
  host->set_error(ctx, "%s: write failed", plugin);
  return 1;
}

//! The traced function's name, or its address in hex if the host has none.
inline std::string symbol_or_hex(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                                 uint64_t ip) {
  if (const char *name = host->symbol(ctx, ip); name != nullptr && *name)
    return name;
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%" PRIx64, ip);
  return hex;
}

//! `text` as a JSON string literal, quotes included: quotes and backslashes
//! escaped, control characters as \u00XX, other bytes (UTF-8 included) as
//! they are.
inline std::string json_quote(std::string_view text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += char(c);
    } else if (c < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      quoted += escape;
    } else {
      quoted += char(c);
    }
  }
  quoted += '"';
  return quoted;
}

//! Writes json_quote(text) to `out`.
inline void write_json_string(FILE *out, std::string_view text) {
  const std::string quoted = json_quote(text);
  std::fwrite(quoted.data(), 1, quoted.size(), out);
}

// ---------------------------------------------------------------------------
// Grouping by an argument (--by-arg NAME)
// ---------------------------------------------------------------------------

//! Whether the host has the --by-arg services (arg_key_name, arg_key,
//! arg_key_value).
inline bool host_has_arg_keys(const ftjit_host *host) {
  return host->struct_size >=
         offsetof(ftjit_host, arg_key_value) + sizeof(host->arg_key_value);
}

//! The parameter the session groups by, "" when none.
inline std::string arg_key_name(const ftjit_host *host, ftjit_plugin_ctx *ctx) {
  if (!host_has_arg_keys(host)) return {};
  const char *name = host->arg_key_name(ctx);
  return name != nullptr ? name : "";
}

//! One group's value: `text` as the trace shows it (`RED`, `-3`, `'q'`,
//! `"a1"`, `0x7ffd...`), `json` a JSON value (a number for an integer,
//! true/false, else a string: a string's bytes without its quotes, C
//! escapes kept). has: the function has the parameter.
struct ArgKeyShown {
  bool has = false;
  std::string text;
  std::string json;
};

inline void visit_arg_key(const ftjit_arg_value *value, void *arg) {
  auto *shown = static_cast<ArgKeyShown *>(arg);
  shown->has = true;
  shown->text = value->text != nullptr ? value->text : "";
  switch (value->type) {
    case FTJIT_ARG_INT: shown->json = std::to_string(value->i); break;
    case FTJIT_ARG_UINT: shown->json = std::to_string(value->u); break;
    case FTJIT_ARG_BOOL: shown->json = value->u != 0 ? "true" : "false"; break;
    case FTJIT_ARG_STRING: {
      std::string_view t = shown->text;
      if (t.size() >= 2 && t.front() == '"') {
        const size_t end = t.rfind('"');
        if (end > 0) t = t.substr(1, end - 1);
      }
      shown->json = json_quote(t);
      break;
    }
    default: shown->json = json_quote(shown->text);
  }
}

//! The group of key `key` of traced function `ip`.
inline ArgKeyShown arg_key_shown(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                                 uint64_t ip, uint64_t key) {
  ArgKeyShown shown;
  if (host_has_arg_keys(host)) host->arg_key_value(ctx, ip, key, visit_arg_key, &shown);
  return shown;
}

}  // namespace ftjit_plugin_support

#endif

// SPDX-License-Identifier: MIT
// The C API: status codes out, messages through ftjit_last_error().
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ftjit/ftjit.h"
#include "runtime/c_api_internal.h"
#include "runtime/log.h"
#include "runtime/engine.h"
#include "runtime/inline_blocks.h"

struct ftjit_engine {
  std::unique_ptr<ftjit::Engine> engine;
};

namespace {

thread_local std::string t_last_error;

}  // namespace

ftjit_status ftjit::c_api_fail(const ftjit::Error& e) {
  t_last_error = e.message;
  return e.code;
}

namespace {

ftjit_status fail(const ftjit::Error& e) { return ftjit::c_api_fail(e); }

ftjit_status report(const ftjit::Status& st) {
  if (st.ok()) return FTJIT_OK;
  return fail(st.error());
}

ftjit::Result<ftjit::Filter> to_filter(const ftjit_filter* f) {
  std::vector<std::string> inc, exc;
  if (f != nullptr) {
    if ((f->n_include && !f->include) || (f->n_exclude && !f->exclude)) {
      return ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "filter has a count but no array");
    }
    for (size_t i = 0; i < f->n_include; ++i) {
      if (!f->include[i]) return ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "null include pattern");
      inc.emplace_back(f->include[i]);
    }
    for (size_t i = 0; i < f->n_exclude; ++i) {
      if (!f->exclude[i]) return ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "null exclude pattern");
      exc.emplace_back(f->exclude[i]);
    }
  }
  return ftjit::Filter::compile(inc, exc);
}

}  // namespace

extern "C" {

void ftjit_engine_options_init(ftjit_engine_options* opts) {
  std::memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->default_strategy = FTJIT_STRATEGY_AUTO;
}

void ftjit_ops_init(ftjit_ops* ops) {
  std::memset(ops, 0, sizeof *ops);
  ops->struct_size = sizeof *ops;
  ops->strategy = FTJIT_STRATEGY_AUTO;
}

}  // extern "C"

ftjit_engine* ftjit::create_engine_handle(const ftjit_engine_options* opts, const Backend& backend,
                                          const EntryRelocator* relocator) {
  ftjit_engine_options o;
  ftjit_engine_options_init(&o);
  if (opts != nullptr) {
    // Version 2 callers end before watch_dlopen: what they lack stays 0.
    if (opts->struct_size < offsetof(ftjit_engine_options, watch_dlopen)) {
      fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "engine options from a newer or broken caller"));
      return nullptr;
    }
    std::memcpy(&o, opts, std::min<size_t>(opts->struct_size, sizeof o));
    o.struct_size = sizeof o;
  }
  auto e = ftjit::Engine::create(o, backend);
  if (!e) {
    fail(e.error());
    return nullptr;
  }
  e.value()->set_entry_relocator(relocator);
  return new ftjit_engine{std::move(e.value())};
}

extern "C" {

void ftjit_engine_destroy(ftjit_engine* engine) { delete engine; }

long ftjit_refresh_modules(ftjit_engine* engine) {
  if (engine == nullptr) return -1;
  auto r = engine->engine->refresh_modules();
  if (!r) {
    fail(r.error());
    return -1;
  }
  return static_cast<long>(r.value());
}

ftjit_status ftjit_attach(ftjit_engine* engine, ftjit_ops* ops, const ftjit_filter* filter) {
  if (engine == nullptr) return fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "engine is null"));
  auto f = to_filter(filter);
  if (!f) return fail(f.error());
  return report(engine->engine->attach(ops, f.value()));
}

ftjit_status ftjit_set_filter(ftjit_engine* engine, ftjit_ops* ops, const ftjit_filter* filter) {
  if (engine == nullptr) return fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "engine is null"));
  auto f = to_filter(filter);
  if (!f) return fail(f.error());
  return report(engine->engine->set_filter(ops, f.value()));
}

ftjit_status ftjit_set_paused(ftjit_engine* engine, ftjit_ops* ops, int paused) {
  if (engine == nullptr) return fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "engine is null"));
  return report(engine->engine->set_paused(ops, paused != 0));
}

ftjit_status ftjit_detach(ftjit_engine* engine, ftjit_ops* ops) {
  if (engine == nullptr) return fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "engine is null"));
  return report(engine->engine->detach(ops));
}

long ftjit_ops_site_count(ftjit_engine* engine, const ftjit_ops* ops) {
  return engine ? engine->engine->site_count(ops) : -1;
}

void ftjit_get_stats(ftjit_engine* engine, ftjit_stats* out) {
  if (engine == nullptr || out == nullptr) return;
  *out = engine->engine->stats();
}

ftjit_status ftjit_engine_set_saves(ftjit_engine* engine, ftjit_saves saves) {
  if (engine == nullptr) return fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "engine is null"));
  std::vector<std::string> warnings;
  ftjit_status st = report(engine->engine->set_saves(saves, &warnings));
  for (const std::string& w : warnings) ftjit::log().warn("ftjit: {}", w);
  return st;
}

long ftjit_inline_read(ftjit_engine* engine, const ftjit_ops* ops, ftjit_inline_visit_fn visit,
                       void* arg) {
  if (engine == nullptr || ops == nullptr || visit == nullptr) {
    fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT, "ftjit_inline_read: engine, ops and visit are needed"));
    return -1;
  }
  long n = engine->engine->inline_read(ops, visit, arg);
  if (n < 0) fail(ftjit::make_error(FTJIT_E_NOT_ATTACHED, "ftjit_inline_read: this ops was never attached"));
  return n;
}

long ftjit_inline_read_histograms(ftjit_engine* engine, const ftjit_ops* ops,
                                  ftjit_inline_histogram_fn visit, void* arg) {
  if (engine == nullptr || ops == nullptr || visit == nullptr) {
    fail(ftjit::make_error(FTJIT_E_INVALID_ARGUMENT,
                           "ftjit_inline_read_histograms: engine, ops and visit are needed"));
    return -1;
  }
  long n = engine->engine->inline_read_histograms(ops, visit, arg);
  if (n < 0) {
    fail(ftjit::make_error(FTJIT_E_NOT_ATTACHED, "ftjit_inline_read_histograms: this ops was never attached"));
  }
  return n;
}

const char* ftjit_site_name(ftjit_engine* engine, uint64_t ip) {
  if (engine == nullptr) return nullptr;
  return engine->engine->site_name(ip);
}

int ftjit_inline_turn(void) { return ftjit::ftjit_inline_fallback_call != 0 ? 1 : 0; }

const char* ftjit_last_error(void) { return t_last_error.c_str(); }

const char* ftjit_status_name(ftjit_status status) {
  switch (status) {
    case FTJIT_OK: return "ok";
    case FTJIT_E_INVALID_ARGUMENT: return "invalid-argument";
    case FTJIT_E_NO_MATCH: return "no-match";
    case FTJIT_E_NOT_PATCHABLE: return "not-patchable";
    case FTJIT_E_ALREADY_ATTACHED: return "already-attached";
    case FTJIT_E_NOT_ATTACHED: return "not-attached";
    case FTJIT_E_UNEXPECTED_BYTES: return "unexpected-bytes";
    case FTJIT_E_OUT_OF_RANGE: return "out-of-range";
    case FTJIT_E_UNSUPPORTED: return "unsupported";
    case FTJIT_E_NO_SITES: return "no-sites";
    case FTJIT_E_SYSTEM: return "system";
    case FTJIT_E_ELF: return "elf";
    case FTJIT_E_INTERNAL: return "internal";
  }
  return "unknown";
}

const char* ftjit_strategy_name(ftjit_strategy strategy) {
  switch (strategy) {
    case FTJIT_STRATEGY_AUTO: return "auto";
    case FTJIT_STRATEGY_LIST: return "list";
    case FTJIT_STRATEGY_CALL_OPS: return "call-ops";
    case FTJIT_STRATEGY_GENERATED: return "generated";
    case FTJIT_STRATEGY_DIRECT: return "direct";
  }
  return "unknown";
}

}  // extern "C"

ftjit::Engine* ftjit::engine_of(ftjit_engine* engine) {
  return engine == nullptr ? nullptr : engine->engine.get();
}

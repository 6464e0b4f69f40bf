// SPDX-License-Identifier: MIT
// ftjit embedding API (C++): RAII over the C API in ftjit.h. A Session owns
// the process's engine; a Probe is one attached callback and detaches
// itself when destroyed. Nothing here throws: failures return null or a
// status, with the message in *error (or ftjit_last_error()).
//
// The callback is a std::function for convenience; for the last nanosecond
// use ftjit_ops with a plain function pointer (generated trampolines call it
// directly).
#ifndef FTJIT_FTJIT_HPP
#define FTJIT_FTJIT_HPP

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ftjit/ftjit.h"

namespace ftjit {

// Include and exclude globs; "MODULE!GLOB" restricts a glob to a module.
struct Filter {
  std::vector<std::string> include;
  std::vector<std::string> exclude;
};

// One traced call, as the callback sees it.
struct Call {
  uint64_t ip;         // entry of the traced function
  uint64_t parent_ip;  // its return address
  ftjit_regs* regs;    // argument registers; writable
  uint64_t arg(int i) const { return regs->arg[i]; }
};

using Callback = std::function<void(const Call&)>;

// One traced call leaving: returned (ret set) or unwound (ret null).
struct Return {
  uint64_t ip;
  uint64_t parent_ip;
  ftjit_ret_regs* ret;  // null: unwound by an exception or longjmp
  bool unwound() const { return ret == nullptr; }
};

using ExitCallback = std::function<void(const Return&)>;

namespace detail {
// Keeps the C strings of a Filter alive for one C call.
class CFilter {
 public:
  explicit CFilter(const Filter& f) {
    for (const auto& s : f.include) inc_.push_back(s.c_str());
    for (const auto& s : f.exclude) exc_.push_back(s.c_str());
    c_ = ftjit_filter{inc_.data(), inc_.size(), exc_.data(), exc_.size()};
  }
  const ftjit_filter* get() const { return &c_; }

 private:
  std::vector<const char*> inc_, exc_;
  ftjit_filter c_{};
};
}  // namespace detail

class Probe {
 public:
  ~Probe() {
    if (engine_ != nullptr) ftjit_detach(engine_, &ops_);
  }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  // Re-selects the probe's sites while it stays attached.
  ftjit_status set_filter(const Filter& filter) {
    detail::CFilter f(filter);
    return ftjit_set_filter(engine_, &ops_, f.get());
  }
  // Detaches now (waiting for a grace period); the destructor then does
  // nothing. Returns the status of the detach.
  ftjit_status detach() {
    ftjit_status st = ftjit_detach(engine_, &ops_);
    if (st == FTJIT_OK) engine_ = nullptr;
    return st;
  }
  long site_count() const { return ftjit_ops_site_count(engine_, &ops_); }

 private:
  friend class Session;
  Probe(ftjit_engine* engine, Callback fn, ExitCallback exit_fn, ftjit_strategy strategy)
      : engine_(engine), fn_(std::move(fn)), exit_fn_(std::move(exit_fn)) {
    ftjit_ops_init(&ops_);
    ops_.func = &Probe::trampoline_entry;
    if (exit_fn_) ops_.exit_func = &Probe::trampoline_exit;
    ops_.private_data = this;
    ops_.strategy = strategy;
  }
  static void trampoline_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs) {
    auto* p = static_cast<Probe*>(ops->private_data);
    if (p->fn_) p->fn_(Call{ip, parent_ip, regs});
  }
  static void trampoline_exit(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops,
                              ftjit_ret_regs* ret) {
    static_cast<Probe*>(ops->private_data)->exit_fn_(Return{ip, parent_ip, ret});
  }

  ftjit_engine* engine_;
  Callback fn_;
  ExitCallback exit_fn_;
  ftjit_ops ops_;
};

class Session {
 public:
  // Opens the process's engine (one per process). Null on failure.
  static std::unique_ptr<Session> open(std::string* error = nullptr,
                                       ftjit_strategy default_strategy = FTJIT_STRATEGY_AUTO) {
    ftjit_engine_options o;
    ftjit_engine_options_init(&o);
    o.default_strategy = default_strategy;
    ftjit_engine* e = ftjit_engine_create(&o);
    if (e == nullptr) {
      if (error) *error = ftjit_last_error();
      return nullptr;
    }
    return std::unique_ptr<Session>(new Session(e));
  }
  ~Session() { ftjit_engine_destroy(engine_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Attaches `fn` to the sites `filter` selects. Null on failure. Probes
  // must be destroyed before their Session.
  std::unique_ptr<Probe> attach(const Filter& filter, Callback fn,
                                ftjit_strategy strategy = FTJIT_STRATEGY_AUTO,
                                std::string* error = nullptr) {
    return attach(filter, std::move(fn), ExitCallback(), strategy, error);
  }
  // The same with an exit callback too (return-address replacement: each
  // entry gets one exit, returned or unwound).
  std::unique_ptr<Probe> attach(const Filter& filter, Callback fn, ExitCallback exit_fn,
                                ftjit_strategy strategy = FTJIT_STRATEGY_AUTO,
                                std::string* error = nullptr) {
    std::unique_ptr<Probe> p(new Probe(engine_, std::move(fn), std::move(exit_fn), strategy));
    detail::CFilter f(filter);
    if (ftjit_attach(engine_, &p->ops_, f.get()) != FTJIT_OK) {
      if (error) *error = ftjit_last_error();
      p->engine_ = nullptr;
      return nullptr;
    }
    return p;
  }

  // The demangled name of the function whose entry is `ip` ("" if none).
  std::string name_of(uint64_t ip) const {
    const char* n = ftjit_site_name(engine_, ip);
    return n ? n : "";
  }
  ftjit_stats stats() const {
    ftjit_stats s;
    ftjit_get_stats(engine_, &s);
    return s;
  }
  ftjit_engine* raw() const { return engine_; }

 private:
  explicit Session(ftjit_engine* e) : engine_(e) {}
  ftjit_engine* engine_;
};

}  // namespace ftjit

#endif  // FTJIT_FTJIT_HPP

// SPDX-License-Identifier: MIT
// "attach" section: time to attach and detach one ops over 20k..1M sites of
// a generated library, and the syncs each batch costs.
//
// Per (library, strategy): dlopen the library fresh, create the engine
// (which discovers its sites), attach once (that first batch also turns
// GCC's 1-byte NOP sleds into nop5 under stop-the-world), detach, then K
// steady-state attach/detach pairs. Engine and library are torn down after
// each strategy so every strategy's first attach meets untouched sleds.
#include <dlfcn.h>
#include <sys/resource.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace ftjit_bench {

namespace {

struct SiteSet {
  const char *key;   // --sites spelling
  const char *file;  // built by bench/CMakeLists.txt
  long sites;
  const char *style;  // how gen_sites laid the sleds out
};

constexpr SiteSet kSiteSets[] = {
    {"20k", "bench_sites_20k.so", 20'000, "gcc 13,8"},
    {"100k", "bench_sites_100k.so", 100'000, "gcc 13,8"},
    {"1m", "bench_sites_1m.so", 1'000'000, "gcc 13,8"},
    {"1m-clang", "bench_sites_1m_clang.so", 1'000'000, "clang 13,8"},
    {"20k-clang14", "bench_sites_20k_clang14.so", 20'000, "clang14 13,8"},
};

constexpr ftjit_strategy kAttachStrategies[] = {FTJIT_STRATEGY_GENERATED, FTJIT_STRATEGY_CALL_OPS,
                                                FTJIT_STRATEGY_LIST};

double ms_since(std::int64_t start_ns) { return static_cast<double>(now_ns() - start_ns) / 1e6; }

// This process's minor page faults so far: discovery's fresh memory.
long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A dlopen handle, closed on destruction.
class Library {
 public:
  explicit Library(const std::string &path)
      : handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() { close(); }
  Library(const Library &) = delete;
  Library &operator=(const Library &) = delete;

  void *get() const { return handle_; }
  void close() {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
  }

 private:
  void *handle_;
};

bool is_loaded(const std::string &path) {
  void *h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

// The engine may apply more than one batch per call (a detach that empties
// a site also restores its original sled and slot in a second batch), so
// "last batch" alone can mislead: keep the stats from before the call too.
struct CallStats {
  ftjit_stats before{};
  ftjit_stats after{};
};

// <prefix>_syncs/_batches/_grace_periods/_traps: growth over one call;
// <prefix>_last_batch_*: ftjit_stats' view of the call's final batch.
void set_call_stats(Row &row, const std::string &prefix, const CallStats &c) {
  auto delta = [](std::uint64_t after, std::uint64_t before) {
    return static_cast<long>(after - before);
  };
  row.set(prefix + "_syncs", delta(c.after.syncs, c.before.syncs))
      .set(prefix + "_batches", delta(c.after.batches, c.before.batches))
      .set(prefix + "_last_batch_syncs", static_cast<long>(c.after.last_batch_syncs))
      .set(prefix + "_last_batch_sites", static_cast<long>(c.after.last_batch_sites))
      .set(prefix + "_grace_periods", delta(c.after.grace_periods, c.before.grace_periods))
      .set(prefix + "_traps", delta(c.after.traps_emulated, c.before.traps_emulated));
}

class AttachRun {
 public:
  AttachRun(const BenchOptions &opts, Report &report, const SiteSet &set, ftjit_strategy strategy)
      : opts_(opts),
        report_(report),
        set_(set),
        strategy_(strategy),
        path_(opts.sites_dir + "/" + set.file) {}

  void run();

 private:
  bool attach_timed(Tracer &tracer, std::vector<double> &ms, CallStats &stats);
  bool detach_timed(Tracer &tracer, std::vector<double> &ms, CallStats &stats);
  bool check_calls(Tracer &tracer, void *lib, bool attached, std::uint64_t *expected_hits);
  std::string name() const {
    return std::string("attach/") + set_.key + "/" + strategy_key(strategy_);
  }
  void fail(const std::string &what) { report_.add_error(name() + ": " + what); }

  const BenchOptions &opts_;
  Report &report_;
  const SiteSet &set_;
  const ftjit_strategy strategy_;
  const std::string path_;
  std::unique_ptr<Engine> engine_;
  Row row_;
};

bool AttachRun::attach_timed(Tracer &tracer, std::vector<double> &ms, CallStats &stats) {
  stats.before = engine_->stats();
  const std::int64_t start = now_ns();
  const ftjit_status st = tracer.attach(*engine_);
  const double elapsed = ms_since(start);
  if (st != FTJIT_OK) {
    const std::string text = status_text(st);
    if (st != FTJIT_E_UNSUPPORTED) fail("attach failed: " + text);
    row_.set("status", text);
    return false;
  }
  ms.push_back(elapsed);
  stats.after = engine_->stats();
  const long count = ftjit_ops_site_count(engine_->get(), &tracer.ops);
  if (count != set_.sites) {
    fail("ftjit_ops_site_count is " + std::to_string(count) + ", expected " +
         std::to_string(set_.sites));
    row_.set("status", "site count mismatch");
    return false;
  }
  return true;
}

bool AttachRun::detach_timed(Tracer &tracer, std::vector<double> &ms, CallStats &stats) {
  stats.before = engine_->stats();
  const std::int64_t start = now_ns();
  const ftjit_status st = tracer.detach();
  const double elapsed = ms_since(start);
  if (st != FTJIT_OK) {
    fail("detach failed: " + status_text(st));
    row_.set("status", "detach failed");
    return false;
  }
  ms.push_back(elapsed);
  stats.after = engine_->stats();
  return true;
}

// Calls the first and the last generated function after every batch: proof
// that the batch really patched (or restored) live code at both ends of the
// library, not just counted. Adds 2 to *expected_hits while attached.
bool AttachRun::check_calls(Tracer &tracer, void *lib, bool attached,
                            std::uint64_t *expected_hits) {
  using SiteFn = int (*)();
  const std::string last = "ftjit_site_" + std::to_string(set_.sites - 1);
  for (const char *symbol : {"ftjit_site_0", last.c_str()}) {
    auto fn = reinterpret_cast<SiteFn>(dlsym(lib, symbol));
    if (fn == nullptr) {
      fail(std::string("dlsym ") + symbol + ": " + dlerror());
      return false;
    }
    if (fn() != 0) {
      fail(std::string(symbol) + " returned non-zero");
      return false;
    }
  }
  if (attached) *expected_hits += 2;
  if (tracer.hits != *expected_hits) {
    fail(std::string("after calling 2 sites ") + (attached ? "attached" : "detached") +
         ", the tracer counted " + std::to_string(tracer.hits) + ", expected " +
         std::to_string(*expected_hits));
    row_.set("status", "call check failed");
    return false;
  }
  return true;
}

void AttachRun::run() {
  row_.set("sites_lib", set_.key)
      .set("sites", set_.sites)
      .set("layout", set_.style)
      .set("strategy", strategy_key(strategy_));
  Table &table =
      report_.table("attach", "attach: one ops over every site of a generated library (ms)");
  auto finish = [&] {
    table.rows.push_back(row_);
    spdlog::info("{}: done", name());
  };

  // A library still mapped from an earlier run keeps its converted sleds:
  // the first attach is then not a "first" one, and the row says so.
  const bool fresh = !is_loaded(path_);
  row_.set("fresh_sleds", fresh);
  // The process without the library first: discover_ms minus that is the
  // library's own discovery (module_ms), the bench binary's symbols and
  // debug info, libc's and the others' left out. The second of two: the
  // first pays for what only a process's first engine reads cold.
  std::string error;
  double base_ms = 0;
  long base_faults = 0;
  for (int i = 0; fresh && i < 2; ++i) {
    const long faults_before = minor_faults();
    const std::int64_t base_start = now_ns();
    auto base = Engine::create(strategy_, &error);
    base_ms = ms_since(base_start);
    base_faults = minor_faults() - faults_before;
    if (!base) {
      fail(error);
      row_.set("status", "engine failed");
      return finish();
    }
  }
  std::int64_t start = now_ns();
  Library lib(path_);
  if (lib.get() == nullptr) {
    fail(std::string("dlopen: ") + dlerror());
    row_.set("status", "dlopen failed");
    return finish();
  }
  row_.set("load_ms", ms_since(start));

  const long faults_before = minor_faults();
  start = now_ns();
  engine_ = Engine::create(strategy_, &error);
  if (!engine_) {
    fail(error);
    row_.set("status", "engine failed");
    return finish();
  }
  const double discover_ms = ms_since(start);
  row_.set("discover_ms", discover_ms);
  row_.set("module_ms", fresh ? Value(discover_ms - base_ms) : Value());
  row_.set("module_faults", fresh ? Value(minor_faults() - faults_before - base_faults) : Value());

  {
    Tracer tracer(std::string(set_.file) + "!ftjit_site_*", strategy_);
    std::vector<double> first_attach, first_detach, attach_ms, detach_ms;
    CallStats first_attach_stats, attach_stats, detach_stats;
    std::uint64_t hits = 0;
    bool ok = attach_timed(tracer, first_attach, first_attach_stats) &&
              check_calls(tracer, lib.get(), true, &hits) &&
              detach_timed(tracer, first_detach, detach_stats) &&
              check_calls(tracer, lib.get(), false, &hits);
    row_.set("first_attach_ms", first_attach.empty() ? Value() : Value(first_attach[0]));
    row_.set("first_detach_ms", first_detach.empty() ? Value() : Value(first_detach[0]));
    // Steady state: another ops stays attached (to a function of the bench
    // binary, not of the library), as in a running tracer session. The
    // engine restores the compiler's sleds only when its last ops leaves,
    // so the pairs below rewrite sites, not sleds.
    Tracer sentinel("bench_leaf", strategy_);
    ok = ok && sentinel.attach(*engine_) == FTJIT_OK;
    for (int rep = 0; ok && rep < opts_.reps; ++rep) {
      ok = attach_timed(tracer, attach_ms, attach_stats) &&
           check_calls(tracer, lib.get(), true, &hits) &&
           detach_timed(tracer, detach_ms, detach_stats) &&
           check_calls(tracer, lib.get(), false, &hits);
    }
    if (ok) {
      const Summary a = summarize(attach_ms);
      const Summary d = summarize(detach_ms);
      row_.set("attach_ms", a.median).set("attach_min_ms", a.min).set("attach_max_ms", a.max);
      row_.set("detach_ms", d.median).set("detach_min_ms", d.min).set("detach_max_ms", d.max);
      // Stats of the first attach and of the last steady-state pair (every
      // pair should look alike).
      set_call_stats(row_, "first_attach", first_attach_stats);
      set_call_stats(row_, "attach", attach_stats);
      set_call_stats(row_, "detach", detach_stats);
      row_.set("sync_fallbacks", static_cast<long>(detach_stats.after.sync_fallbacks))
          .set("status", "ok");
    }
  }

  engine_.reset();
  lib.close();
  if (is_loaded(path_)) {
    report_.table("attach", "")
        .notes.push_back(std::string(set_.file) +
                         " stayed mapped after dlclose: later first attaches reuse its sleds");
  }
  finish();
}

}  // namespace

void run_attach_section(const BenchOptions &opts, Report &report) {
  Table &table =
      report.table("attach", "attach: one ops over every site of a generated library (ms)");
  for (const SiteSet &set : kSiteSets) {
    const bool requested =
        opts.site_sets.empty() ||
        std::find(opts.site_sets.begin(), opts.site_sets.end(), set.key) != opts.site_sets.end();
    if (!requested) continue;
    const std::string path = opts.sites_dir + "/" + set.file;
    if (access(path.c_str(), R_OK) != 0) {
      // Only an error when asked for by name; by default a build without
      // the large libraries (FTJIT_BENCH_LARGE_SITES=OFF) just skips them.
      const std::string msg = "attach/" + std::string(set.key) + ": " + path + " not found";
      if (opts.site_sets.empty()) {
        table.notes.push_back(msg + " (skipped)");
      } else {
        report.add_error(msg);
      }
      continue;
    }
    for (const ftjit_strategy strategy : kAttachStrategies) {
      AttachRun(opts, report, set, strategy).run();
    }
  }
  table.text_columns = {"sites_lib",       "strategy",       "discover_ms",     "module_ms",
                        "module_faults",
                        "first_attach_ms", "first_detach_ms", "attach_ms", "detach_ms",
                        "attach_syncs",    "attach_batches", "attach_last_batch_sites",
                        "detach_syncs",    "detach_batches", "status"};
  table.notes.push_back(
      "filter: <library file>!ftjit_site_*; discover_ms: ftjit_engine_create "
      "after dlopen (reads every loaded module); module_ms: discover_ms minus an "
      "ftjit_engine_create just before the dlopen, the library's own discovery; "
      "module_faults: the page faults of that share (fresh memory: in a VM each costs "
      "a trip to the hypervisor)");
  table.notes.push_back(
      "first_attach_ms: from the sleds as compiled (GCC's 1-byte NOP sleds are "
      "rewritten under stop-the-world then); first_detach_ms: the engine's last ops "
      "leaves, so it also restores the compiler's sleds; attach_ms/detach_ms: median of " +
      std::to_string(opts.reps) +
      " pairs after that while another ops stays attached elsewhere (steady state)");
  table.notes.push_back(
      "*_syncs, *_batches: growth of ftjit_stats over one call (last pair); "
      "*_last_batch_sites: last_batch_sites after the call");
}

}  // namespace ftjit_bench

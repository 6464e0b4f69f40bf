// SPDX-License-Identifier: MIT
#include "cli/session_driver.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cli/agent_client.h"
#include "cli/agent_unload.h"
#include "cli/inject/inject_internal.h"
#include "cli/process_modules.h"
#include "cli/report_output.h"
#include "runtime/control/latency_slice.h"

namespace ftjit::cli {
namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<int> g_flush_signals{0};

void on_stop_signal(int sig) { g_stop_signal.store(sig); }
void on_flush_signal(int) { g_flush_signals.fetch_add(1); }

int fail(const DriveTarget& t, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", t.command, message.c_str());
  return 1;
}

// Prints the report: the agent already wrote it to -o FILE, else it came
// back in the reply.
void print_report(const control::Reply& r, const TraceOptions& o) {
  if (o.output.empty()) {
    std::fwrite(r.text.data(), 1, r.text.size(), stdout);
    std::fflush(stdout);
  }
}

void print_summary(const DriveTarget& t, const control::Reply& r, const TraceOptions& o) {
  using ull = unsigned long long;
  if (r.recursion_drops != 0 || r.events_dropped != 0) {
    std::fprintf(stderr, "%s: dropped %llu nested calls (traced code called from a tracer, or by ftjit's own threads), "
                         "%llu events (full buffers%s)\n",
                 t.command, static_cast<ull>(r.recursion_drops), static_cast<ull>(r.events_dropped),
                 r.buffer_timeouts != 0 ? "; the writer freed no room for --buffer-wait" : "");
  }
  if (r.events_overwritten != 0) {
    std::fprintf(stderr, "%s: %llu older events overwritten (the flight recorder keeps the last "
                         "--buffer-size of each thread)\n",
                 t.command, static_cast<ull>(r.events_overwritten));
  }
  if (o.verbose) {
    if (!r.writer.empty()) {
      std::fprintf(stderr, "%s: writer: %s; threads waited for room %llu times, %.1f ms in all; "
                           "gave up %llu times\n",
                   t.command, r.writer.c_str(), static_cast<ull>(r.buffer_waits),
                   static_cast<double>(r.buffer_wait_ns) / 1e6, static_cast<ull>(r.buffer_timeouts));
    }
    std::fprintf(stderr, "%s: %s\n", t.command, r.message.c_str());
  }
}

// The plugins' copies in a target's root (a container's /tmp), for its
// agent to load: each goes once the agent has it, or with this object
// (every way out of drive_session).
class StagedPlugins {
 public:
  explicit StagedPlugins(const inject::TargetInfo* target) : target_(target) {}
  ~StagedPlugins() { (void)remove(); }
  StagedPlugins(const StagedPlugins&) = delete;
  StagedPlugins& operator=(const StagedPlugins&) = delete;

  // Where the target opens host_path: host_path itself if it can (or
  // without a target), else a copy.
  Result<std::string> stage(const std::string& host_path) {
    if (target_ == nullptr) return host_path;
    auto path = inject::stage_library(*target_, host_path);
    if (path && *path != host_path) copies_.push_back(*path);
    return path;
  }

  Status remove() {
    Status result;
    for (const std::string& path : copies_) {
      if (auto st = inject::remove_staged_copy(*target_, path); !st && result) result = std::move(st);
    }
    copies_.clear();
    return result;
  }

 private:
  const inject::TargetInfo* target_;
  std::vector<std::string> copies_;
};

// What the child's wait status means as our exit status.
int child_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  sa.sa_handler = on_flush_signal;
  sigaction(SIGUSR1, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() { return g_stop_signal.load() != 0; }

int drive_session(const DriveTarget& t, const TraceOptions& o) {
  PhaseClock own_phases;
  PhaseClock& phases = t.phases != nullptr ? *t.phases : own_phases;
  install_stop_signals();
  int child_status = -1;
  auto reap = [&](int options) {
    if (!t.is_child || child_status != -1) return child_status != -1;
    // A program killed by a signal (ours after a failed attach, or its own)
    // left its agent's socket behind: removed while the zombie still holds
    // the pid, so no newer process of that pid can own the path yet.
    siginfo_t info{};
    while (::waitid(P_PID, t.pid, &info, WEXITED | WNOWAIT | (options & WNOHANG)) < 0 && errno == EINTR) {
    }
    if (info.si_pid == t.pid && (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED)) {
      control::remove_socket(::getuid(), control::socket_path(::getuid(), t.pid));
    }
    int st;
    pid_t r;
    // A stop signal (Ctrl-C again, say) must not end the wait for a child
    // that ignores it.
    while ((r = ::waitpid(t.pid, &st, options)) < 0 && errno == EINTR) {
    }
    if (r == t.pid) child_status = st;
    return child_status != -1;
  };
  auto fail_run = [&](const std::string& message) {
    // A program started under ftjit that cannot be traced as asked does
    // not run on untraced: it is stopped, and the error says why.
    if (t.is_child && !reap(WNOHANG)) {
      ::kill(t.pid, SIGKILL);
      reap(0);
    }
    return fail(t, message);
  };

  std::vector<PlannedOutput> planned;
  auto request = make_attach_request(o, &planned);
  if (!request) return fail_run(request.error().message);
  StagedPlugins staged(t.stage_plugins_into);
  for (control::PluginRequest& p : request->plugins) {
    auto path = staged.stage(p.path);
    if (!path) return fail_run(path.error().message);
    p.path = *path;
  }
  auto conn = AgentConnection::connect(t.pid, t.connect_wait_ms);
  if (!conn) return fail_run(conn.error().message);
  phases.end("connect to the agent");
  if ((*conn)->hello().attached) {
    return fail_run("process " + std::to_string(t.pid) + " is already being traced (by ftjit pid " +
                    std::to_string((*conn)->hello().owner_pid) + "): run `ftjit detach -p " +
                    std::to_string(t.pid) + "` first");
  }
  auto generator = GeneratorService::start(t.pid);
  if (!generator) return fail_run(generator.error().message);
  phases.end("register as code generator");
  if (const ArgOptions arg_options = o.arg_options(); arg_options.any()) {
    std::vector<std::string> notes;
    auto args = build_arg_capture(t.pid, arg_options, o.include, o.exclude, &notes);
    if (!args) return fail_run(args.error().message);
    request->args = std::move(args.value());
    for (const std::string& note : notes) std::fprintf(stderr, "%s: %s\n", t.command, note.c_str());
    if (o.verbose) {
      std::fprintf(stderr, "%s: arguments: %zu functions, %zu conditions\n", t.command,
                   request->args.functions.size(), request->args.conditions.size());
    }
    phases.end("read the arguments' types (DWARF)");
  }
  // Functions whose records the toolchain dropped, found by their sleds
  // (core/sled_recovery.h), as the agent finds them: for -v, read while
  // the agent attaches (the maps and the modules' files, nothing of the
  // process's memory), on time this process otherwise spends waiting,
  // and started before the attach, after which a short program may be
  // gone. Read first, it added a scan of every module to -v's attach.
  std::future<std::vector<std::string>> recovery_notes;
  if (o.verbose) recovery_notes = std::async(std::launch::async, recovered_site_notes, t.pid);

  // The report files, opened here (the target may not see our paths),
  // their fds passed in the order the request announces them.
  std::vector<ReportOutput> outputs;
  std::vector<int> output_fds;
  for (const PlannedOutput& p : planned) {
    auto opened = ReportOutput::open(p.path, p.pprof);
    if (!opened) return fail_run(opened.error().message);
    outputs.push_back(std::move(*opened));
    output_fds.push_back(outputs.back().agent_fd());
  }
  // The reports are complete: what the CLI makes of them (pprof) is made.
  auto finish_outputs = [&]() -> Status {
    for (ReportOutput& out : outputs) FTJIT_TRY(out.finish());
    return {};
  };

  // A progress line on a terminal while a large process is being
  // patched. The thread is woken as soon as the reply is in: joining it
  // must not add a tick. With no terminal to show it on there is no
  // thread, and no wait for it to wake on a busy machine.
  std::mutex progress_mu;
  std::condition_variable progress_cv;
  bool attaching = true;
  auto started = std::chrono::steady_clock::now();
  std::thread progress;
  if (isatty(STDERR_FILENO)) progress = std::thread([&] {
    bool shown = false;
    std::unique_lock<std::mutex> lock(progress_mu);
    while (!progress_cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !attaching; })) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (s >= 1.0) {
        std::fprintf(stderr, "\r%s: attaching to %d... %.1f s", t.command, t.pid, s);
        shown = true;
      }
    }
    if (shown) std::fprintf(stderr, "\n");
  });
  bool exited = false;
  if (t.producers.valid()) request->producers = t.producers.get();
  Result<control::Reply> reply = [&] {
    control::RaisedPriorityFor raised(agent_thread_id(t.pid));  // latency_slice.h: why
    return (*conn)->request(control::MsgType::kAttach, control::encode(*request), output_fds, -1, &exited);
  }();
  {
    std::lock_guard<std::mutex> lock(progress_mu);
    attaching = false;
  }
  progress_cv.notify_all();
  if (progress.joinable()) progress.join();
  // The agent has loaded them (or never will).
  if (auto st = staged.remove(); !st) return fail_run(st.error().message);
  if (!reply) return fail_run("attach failed: " + reply.error().message);
  if (exited || reply->code != 0) {
    return fail_run(reply->message.empty() ? "attach failed (code " + std::to_string(reply->code) + (exited ? ", process exited)" : ")") : reply->message);
  }
  double attach_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  phases.end("attach request");
  for (const auto& [name, micros] : reply->phases) phases.detail(name, micros);
  for (const std::string& w : reply->warnings) std::fprintf(stderr, "%s: warning: %s\n", t.command, w.c_str());
  if (o.verbose) {
    phases.print(t.command);
    std::fprintf(stderr, "%s: %s in %.1f ms (%llu trampolines generated here)\n", t.command,
                 reply->message.c_str(), attach_ms,
                 static_cast<unsigned long long>((*generator)->served()));
    for (const std::string& note : recovery_notes.get()) std::fprintf(stderr, "%s: %s\n", t.command, note.c_str());
  }

  // Attached: while the session runs, this CLI only waits (and answers
  // the agent's rare requests for code, on its generator's thread), at
  // the priority the user gave it; the detach has the raised one again.
  const bool raised = control::lower_own_priority();

  // Wait for the end: the duration, a stop signal, or the process's exit
  // (the agent sends the final report as it exits).
  auto deadline = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(o.duration));
  // The process exited, and `final_report` is what its agent sent then.
  auto finish_exited = [&](const control::Reply& final_report) {
    print_report(final_report, o);
    print_summary(t, final_report, o);
    if (o.verbose) std::fprintf(stderr, "%s: process %d exited\n", t.command, t.pid);
    const Status finished = final_report.code == 0 ? finish_outputs() : Status{};
    if (t.is_child) {
      reap(0);
      return finished ? child_exit_code(child_status) : fail(t, finished.error().message);
    }
    if (!finished) return fail(t, finished.error().message);
    return final_report.code == 0 ? 0 : fail(t, final_report.message);
  };
  int flushes_done = 0;
  for (;;) {
    if (stop_requested()) break;
    if (o.duration > 0 && std::chrono::steady_clock::now() >= deadline) break;
    if (const int asked = g_flush_signals.load(); asked != flushes_done) {
      // SIGUSR1: the buffers (a flight recorder's, say) are written now.
      flushes_done = asked;
      auto r = (*conn)->request(control::MsgType::kFlush, std::string(), -1, -1, &exited);
      if (r && exited) return finish_exited(*r);  // it exited meanwhile: that is its report
      if (!r || r->code != 0) {
        std::fprintf(stderr, "%s: flush failed: %s\n", t.command,
                     !r ? r.error().message.c_str() : r->message.c_str());
      } else if (o.verbose) {
        std::fprintf(stderr, "%s: %s\n", t.command, r->message.c_str());
      }
    }
    // Wake for the deadline itself, not the next 100 ms tick after it.
    int wait_ms = 100;
    if (o.duration > 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 100));
    }
    pollfd p{(*conn)->fd(), POLLIN, 0};
    int n = ::poll(&p, 1, wait_ms);
    if (n > 0) {
      auto frame = control::recv_frame((*conn)->fd(), 10000);
      if (frame && frame->type == control::MsgType::kExited) {
        auto final_report = control::decode_reply(frame->payload);
        if (!final_report) return fail(t, final_report.error().message);
        return finish_exited(*final_report);
      }
      // The connection closed without a report: the process was killed.
      if (t.is_child) {
        reap(0);
        std::fprintf(stderr, "%s: process %d ended without a report (%s)\n", t.command, t.pid,
                     WIFSIGNALED(child_status) ? strsignal(WTERMSIG(child_status)) : "exited");
        return child_exit_code(child_status);
      }
      // Alive without its agent: it replaced its program (exec), and the
      // agent, its patches and its socket's listener went with the old one.
      if (!inject::detail::process_gone(t.pid)) {
        std::error_code ec;
        const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(t.pid) + "/exe", ec);
        return fail(t, "process " + std::to_string(t.pid) + " replaced its program (exec" +
                           (ec ? std::string() : " of " + exe.string()) +
                           "): the tracing ended with the old one, without a report");
      }
      return fail(t, "process " + std::to_string(t.pid) + " ended without a report (killed?)");
    }
  }

  control::Detach detach;
  detach.unload = t.unload;
  const auto detach_started = std::chrono::steady_clock::now();
  auto ms_since = [](std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
  };
  if (raised) (void)control::raise_own_priority();
  Result<control::Reply> done = [&] {
    control::RaisedPriorityFor raised_agent(agent_thread_id(t.pid));  // latency_slice.h: why
    return (*conn)->request(control::MsgType::kDetach, control::encode(detach), -1, -1, &exited);
  }();
  if (!done && t.is_child) {
    // The program ended while we detached (it got the Ctrl-C too): its
    // status is the answer.
    reap(0);
    std::fprintf(stderr, "%s: process %d ended while detaching; no report\n", t.command, t.pid);
    return child_exit_code(child_status);
  }
  if (!done) return fail(t, "detach failed: " + done.error().message);
  print_report(*done, o);
  print_summary(t, *done, o);
  if (!exited && done->code != 0) return fail(t, done->message);
  // A report the CLI could not convert fails the run, which otherwise
  // ends as it would.
  const Status finished = done->code == 0 ? finish_outputs() : Status{};
  if (!finished) std::fprintf(stderr, "%s: %s\n", t.command, finished.error().message.c_str());
  if (t.unload && !exited) {
    generator->reset();
    if (o.verbose) std::fprintf(stderr, "%s: detached in %.1f ms\n", t.command, ms_since(detach_started));
    const auto unload_started = std::chrono::steady_clock::now();
    if (auto st = unload_agent(t.pid, **conn); !st) return fail(t, st.error().message);
    if (o.verbose) std::fprintf(stderr, "%s: agent unloaded in %.1f ms\n", t.command, ms_since(unload_started));
  }
  if (t.is_child) {
    // Detached on a signal: the program now runs on untraced; pass the
    // signal on and wait for it, as a shell would.
    if (int sig = g_stop_signal.load(); sig != 0 && !reap(WNOHANG)) ::kill(t.pid, sig);
    reap(0);
    return finished ? child_exit_code(child_status) : 1;
  }
  return finished ? 0 : 1;
}

}  // namespace ftjit::cli

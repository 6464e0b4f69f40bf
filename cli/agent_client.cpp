// SPDX-License-Identifier: MIT
#include "cli/agent_client.h"

#include <elf.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "backends/backend.h"
#include "cli/guest_program.h"
#include "cli/module_producers.h"

namespace ftjit::cli {
namespace {

// The last field of "NSpid:" (the pid in the target's own namespace) and
// the real uid of "Uid:", from /proc/PID/status.
Result<std::pair<pid_t, uid_t>> pid_and_uid_seen_by(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
  pid_t ns_pid = pid;
  long uid = -1;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string key;
    f >> key;
    if (key == "NSpid:") {
      pid_t v;
      while (f >> v) ns_pid = v;
    } else if (key == "Uid:") {
      f >> uid;
    }
  }
  if (uid < 0) return make_error(FTJIT_E_SYSTEM, "cannot read /proc/" + std::to_string(pid) + "/status");
  return std::make_pair(ns_pid, static_cast<uid_t>(uid));
}

}  // namespace

Result<std::string> find_agent_library() {
  if (const char* env = std::getenv("FTJIT_AGENT"); env != nullptr && *env != '\0') {
    if (::access(env, R_OK) != 0) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, std::string("FTJIT_AGENT=") + env + ": " + std::strerror(errno));
    }
    return std::string(env);
  }
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string dir(exe);
    dir.resize(dir.rfind('/'));
    // The build tree has it in lib/; an installed prefix in its LIBDIR.
    for (std::string lib : {std::string("lib"), std::string(FTJIT_AGENT_RELATIVE_DIR)}) {
      std::string path = dir + "/../" + lib + "/libftjit-agent.so";
      char real[PATH_MAX];
      if (::realpath(path.c_str(), real) != nullptr) return std::string(real);
    }
  }
  return make_error(FTJIT_E_INVALID_ARGUMENT,
                    "cannot find libftjit-agent.so beside the ftjit executable (../lib/); set FTJIT_AGENT");
}

Result<std::string> find_guest_agent_library(Isa isa) {
  return find_guest_file(isa, "FTJIT_AGENT", "libftjit-agent.so", R_OK, "shared object",
                         std::string("scripts/build_cross.sh ") + isa_name(isa) +
                             " --runtime-only builds and links it there (scripts/setup.sh runs it)");
}

Result<std::string> agent_socket_for(pid_t pid) {
  auto seen = pid_and_uid_seen_by(pid);
  if (!seen) return seen.take_error();
  return "/proc/" + std::to_string(pid) + "/root" + control::socket_path(seen->second, seen->first);
}

Result<std::unique_ptr<AgentConnection>> AgentConnection::connect(pid_t pid, int wait_ms) {
  auto path = agent_socket_for(pid);
  if (!path) return path.take_error();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // /proc/PID/root/tmp/... may exceed sun_path: connect through a
  // descriptor of the directory instead.
  std::string dir = path->substr(0, path->rfind('/'));
  std::string base = path->substr(path->rfind('/') + 1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  // A freshly started or injected agent listens within tens of ms: look
  // every millisecond for the first two seconds (a failed connect costs
  // microseconds; a backoff that had reached 16 ms made `ftjit run` wait
  // most of a period for an agent long ready), then every 20 ms.
  const auto started = std::chrono::steady_clock::now();
  auto retry_in = std::chrono::microseconds(500);
  for (;;) {
    int dfd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    std::string via = dfd >= 0 ? "/proc/self/fd/" + std::to_string(dfd) + "/" + base : *path;
    std::memcpy(addr.sun_path, via.c_str(), std::min(via.size() + 1, sizeof addr.sun_path - 1));
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      if (dfd >= 0) ::close(dfd);
      return make_error(FTJIT_E_SYSTEM, std::string("socket: ") + std::strerror(errno));
    }
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    int err = errno;
    if (dfd >= 0) ::close(dfd);
    if (rc == 0) {
      std::unique_ptr<AgentConnection> c(new AgentConnection());
      c->fd_ = fd;
      auto frame = control::recv_frame(fd, 10000);
      if (!frame) {
        return make_error(FTJIT_E_SYSTEM, "the agent of process " + std::to_string(pid) +
                                              " did not answer (" + frame.error().message + ")");
      }
      if (frame->type != control::MsgType::kHello) {
        return make_error(FTJIT_E_SYSTEM, "the agent of process " + std::to_string(pid) + " is confused");
      }
      auto hello = control::decode_hello(frame->payload);
      if (!hello) return hello.take_error();
      if (hello->version != control::kProtocolVersion) {
        return make_error(FTJIT_E_UNSUPPORTED,
                          "the agent in process " + std::to_string(pid) + " speaks protocol " +
                              std::to_string(hello->version) + ", this ftjit " +
                              std::to_string(control::kProtocolVersion));
      }
      c->hello_ = *hello;
      return c;
    }
    ::close(fd);
    if (std::chrono::steady_clock::now() >= deadline || (err != ENOENT && err != ECONNREFUSED)) {
      if (::kill(pid, 0) != 0 && errno == ESRCH) {
        return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
      }
      // /proc/PID/root, the way to a socket in its mount namespace (a
      // container's), is ptrace's to give.
      if (err == EACCES || err == EPERM) {
        return make_error(FTJIT_E_UNSUPPORTED,
                          "cannot reach the agent of process " + std::to_string(pid) + " (" + *path + ": " +
                              std::strerror(err) + "): that needs ptrace access to it (CAP_SYS_PTRACE for a "
                              "process of another user): run ftjit as root (sudo) or as its user");
      }
      return make_error(FTJIT_E_NOT_ATTACHED, "no ftjit agent in process " + std::to_string(pid) +
                                                  " (" + *path + ": " + std::strerror(err) + ")");
    }
    std::this_thread::sleep_for(retry_in);
    const bool early = std::chrono::steady_clock::now() - started < std::chrono::seconds(2);
    retry_in = early ? std::chrono::microseconds(1000) : std::chrono::microseconds(20000);
  }
}

AgentConnection::~AgentConnection() {
  if (fd_ >= 0) ::close(fd_);
}

Result<control::Reply> AgentConnection::request(control::MsgType type, const std::string& payload,
                                                int pass_fd, int timeout_ms, bool* exited) {
  return request(type, payload, pass_fd >= 0 ? std::vector<int>{pass_fd} : std::vector<int>{}, timeout_ms,
                 exited);
}

Result<control::Reply> AgentConnection::request(control::MsgType type, const std::string& payload,
                                                const std::vector<int>& pass_fds, int timeout_ms, bool* exited) {
  if (exited != nullptr) *exited = false;
  FTJIT_TRY(control::send_frame_fds(fd_, type, payload, pass_fds));
  auto frame = control::recv_frame(fd_, timeout_ms);
  if (!frame) {
    if (frame.error().message == "connection closed") {
      return make_error(FTJIT_E_SYSTEM, "the process exited or closed the control connection");
    }
    return frame.take_error();
  }
  if (frame->type == control::MsgType::kExited && exited != nullptr) *exited = true;
  if (frame->type != control::MsgType::kReply && frame->type != control::MsgType::kExited) {
    return make_error(FTJIT_E_SYSTEM, "unexpected message from the agent");
  }
  return control::decode_reply(frame->payload);
}

control::Generated answer_generate(std::string_view payload, const TrampolineEmitter& emitter,
                                   const std::string& root) {
  control::Generated out;
  auto req = control::decode_generate(payload);
  Result<std::string> bytes = std::string();
  if (!req) {
    bytes = req.take_error();
  } else if (req->kind == control::GenerateKind::kSiteCode) {
    auto code = emitter.emit_site_code(req->entry, req->place);
    bytes = code ? Result<std::string>(control::encode_site_code(*code)) : Result<std::string>(code.take_error());
  } else if (req->kind == control::GenerateKind::kRelocatedEntry) {
    const EntryRelocator* relocator = local_entry_relocator();
    RelocationRequest r = req->relocation;
    if (!root.empty() && !r.path.empty() && r.path[0] == '/') r.path = root + r.path;
    auto entry = relocator != nullptr
                     ? relocator->relocate_entry(r)
                     : Result<RelocatedEntry>(make_error(FTJIT_E_UNSUPPORTED, "this ftjit has no instruction decoder"));
    bytes = entry ? Result<std::string>(control::encode_relocated_entry(*entry))
                  : Result<std::string>(entry.take_error());
  } else if (req->kind == control::GenerateKind::kProducers) {
    auto units = read_producers(req->module, root);
    bytes = units ? Result<std::string>(control::encode_producers(*units)) : Result<std::string>(units.take_error());
  } else if (req->kind == control::GenerateKind::kInlineTemplate) {
    auto code = emitter.emit_inline_template(req->inline_request);
    bytes = code ? Result<std::string>(std::string(code->begin(), code->end()))
                 : Result<std::string>(code.take_error());
  } else {
    auto code = req->kind == control::GenerateKind::kExitTrampoline
                    ? emitter.emit_exit_trampoline(req->exit, req->place)
                    : emitter.emit_trampoline(req->trampoline, req->place);
    bytes = code ? Result<std::string>(std::string(code->begin(), code->end()))
                 : Result<std::string>(code.take_error());
  }
  if (bytes) {
    out.bytes = std::move(bytes.value());
  } else {
    out.code = bytes.error().code;
    out.message = bytes.error().message;
  }
  return out;
}

Result<std::unique_ptr<GeneratorService>> GeneratorService::start(pid_t pid) {
  auto conn = AgentConnection::connect(pid);
  if (!conn) return conn.take_error();
  const TrampolineEmitter* emitter = emitter_for(static_cast<Isa>((*conn)->hello().isa));
  if (emitter == nullptr) {
    return make_error(FTJIT_E_UNSUPPORTED, std::string("process ") + std::to_string(pid) +
                                               " runs " + isa_name(static_cast<Isa>((*conn)->hello().isa)) +
                                               " code, which this ftjit cannot generate");
  }
  auto ack = (*conn)->request(control::MsgType::kGenerator, "", -1, 10000);
  if (!ack) return ack.take_error();
  std::unique_ptr<GeneratorService> g(new GeneratorService());
  g->conn_ = std::move(conn.value());
  g->root_ = "/proc/" + std::to_string(pid) + "/root";
  g->thread_ = std::thread([raw = g.get()] { raw->serve(); });
  return g;
}

GeneratorService::~GeneratorService() {
  ::shutdown(conn_->fd(), SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
}

void GeneratorService::serve() {
  const TrampolineEmitter* emitter = emitter_for(static_cast<Isa>(conn_->hello().isa));
  for (;;) {
    auto frame = control::recv_frame(conn_->fd(), -1);
    if (!frame || frame->type != control::MsgType::kGenerate) return;
    const control::Generated out = answer_generate(frame->payload, *emitter, root_);
    if (!control::send_frame(conn_->fd(), control::MsgType::kGenerated, control::encode(out))) return;
    served_.fetch_add(1);
  }
}

}  // namespace ftjit::cli

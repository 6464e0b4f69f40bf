// SPDX-License-Identifier: MIT
#include "runtime/agent/control_server.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/site.h"
#include "runtime/agent/agent_phase.h"
#include "runtime/control/latency_slice.h"
#include "runtime/thread_control.h"

namespace ftjit::agent {
namespace {

Error sys_error(const std::string& what) {
  return make_error(FTJIT_E_SYSTEM, what + ": " + std::strerror(errno));
}

// /tmp/ftjit-UID: ours, a directory, no access for anyone else. A directory
// someone else made (or a symlink planted there) is refused, not used.
// Another agent of this user that goes away removes the directory when it
// is empty (control::remove_socket), maybe between our mkdir and lstat:
// made again, a few times.
Status make_private_dir(const std::string& dir) {
  struct stat st;
  for (int attempt = 0;; ++attempt) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return sys_error("mkdir " + dir);
    if (::lstat(dir.c_str(), &st) == 0) break;
    if (errno != ENOENT || attempt == 8) return sys_error("stat " + dir);
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0) {
    return make_error(FTJIT_E_SYSTEM, dir + " is not a private directory of this user: refusing it");
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::start(AgentSession& session) {
  std::unique_ptr<ControlServer> s(new ControlServer(session));
  std::string dir = control::socket_dir(::getuid());
  FTJIT_TRY(make_private_dir(dir));
  s->path_ = control::socket_path(::getuid(), ::getpid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (s->path_.size() >= sizeof addr.sun_path) {
    return make_error(FTJIT_E_SYSTEM, "socket path too long: " + s->path_);
  }
  std::memcpy(addr.sun_path, s->path_.c_str(), s->path_.size() + 1);
  s->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return sys_error("socket");
  // The last agent of this user to go removes the directory when it is
  // empty (control::remove_socket): one may do so between our mkdir and
  // our bind, which then finds no directory. Made again, a few times.
  for (int attempt = 0;; ++attempt) {
    ::unlink(s->path_.c_str());  // a stale socket of a process that had our pid
    if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) break;
    if (errno != ENOENT || attempt == 8) return sys_error("bind " + s->path_);
    FTJIT_TRY(make_private_dir(dir));
  }
  ::chmod(s->path_.c_str(), 0600);
  if (::listen(s->listen_fd_, 8) != 0) return sys_error("listen");
  s->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (s->wake_fd_ < 0) return sys_error("eventfd");

  // The thread inherits this mask: the program's signals go to its own
  // threads, and its sigaction handlers never run on ours.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  ControlServer* raw = s.get();
  s->thread_ = std::thread([raw] {
    pthread_setname_np(pthread_self(), "ftjit-agent");
    (void)control::request_short_slice();  // latency_slice.h: why
    raw->own_nice_ = control::own_nice();
    mark_own_thread();  // never traced: counts are the program's
    set_phase(kPhaseServing);
    raw->loop();
    // Still our code until the thread is reaped: the CLI waits for that too.
    set_phase(kPhaseDone);
  });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return s;
}

ControlServer::~ControlServer() {
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : clients_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (!path_.empty()) control::remove_socket(::getuid(), path_);
}

void ControlServer::wait_first_attach(int timeout_ms) {
  std::unique_lock<std::mutex> lock(attach_mu_);
  attach_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return attach_done_; });
}

void ControlServer::notify_exit(const control::Reply& final_report) {
  std::lock_guard<std::mutex> lock(send_mu_);
  if (owner_fd_ >= 0) {
    (void)control::send_frame(owner_fd_, control::MsgType::kExited, control::encode(final_report));
  }
  control::remove_socket(::getuid(), path_);
}

void ControlServer::loop() {
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (int fd : clients_) fds.push_back({fd, POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        ucred cred{};
        socklen_t len = sizeof cred;
        bool allowed = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
                       (cred.uid == ::getuid() || cred.uid == 0);
        control::Hello hello;
        hello.pid = ::getpid();
        hello.isa = static_cast<uint32_t>(native_isa());
        hello.attached = session_.attached();
        hello.owner_pid = session_.owner_pid();
        if (allowed && control::send_frame(fd, control::MsgType::kHello, control::encode(hello))) {
          clients_.push_back(fd);
        } else {
          ::close(fd);
        }
      }
    }
    for (size_t i = 2; i < fds.size() && !unloading_; ++i) {
      if (fds[i].revents == 0) continue;
      int fd = fds[i].fd;
      const bool keep = handle(fd);
      // A CLI that raised this thread's priority for the request and was
      // killed before it gave it back.
      control::keep_nice(own_nice_);
      if (!keep) {
        clients_.erase(std::find(clients_.begin(), clients_.end(), fd));
        if (!session_.emitter().is_generator(fd)) {
          std::lock_guard<std::mutex> lock(send_mu_);
          if (fd == owner_fd_) owner_fd_ = -1;
          ::close(fd);
        }
      }
    }
    if (unloading_) break;
  }
  // Unloading: nothing of ours may run once this thread is gone. Every
  // connection closes (the CLI waits for that before it has the process
  // dlclose us), the socket goes, and the thread ends on its own.
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    owner_fd_ = -1;
  }
  for (int fd : clients_) ::close(fd);
  clients_.clear();
  session_.emitter().close_all();
  ::close(listen_fd_);
  listen_fd_ = -1;
  control::remove_socket(::getuid(), path_);
  thread_.detach();
}

bool ControlServer::handle(int fd) {
  bool keep = handle_frame(fd);
  return keep && !unloading_;
}

bool ControlServer::handle_frame(int fd) {
  std::vector<int> passed_fds;
  auto close_passed = [&] {
    for (int passed : passed_fds) ::close(passed);
    passed_fds.clear();
  };
  // The peer already sent something (poll said so); a whole frame must
  // follow promptly, or the peer is not a CLI of ours.
  auto frame = control::recv_frame_fds(fd, 5000, &passed_fds, control::kMaxRequest);
  if (!frame) return false;
  auto reply_with = [&](const control::Reply& r) {
    std::lock_guard<std::mutex> lock(send_mu_);
    return control::send_frame(fd, control::MsgType::kReply, control::encode(r)).ok();
  };
  auto refuse = [&](const Error& e) {
    control::Reply r;
    r.code = e.code;
    r.message = e.message;
    reply_with(r);
    return false;
  };
  if (frame->type != control::MsgType::kAttach) close_passed();
  switch (frame->type) {
    case control::MsgType::kGenerator: {
      // From now on this connection answers the emitter's requests, on the
      // emitter's thread; the loop stops watching it. The reply tells the
      // CLI it is registered before it sends anything that needs code.
      if (!reply_with(control::Reply{})) return false;
      session_.emitter().add_generator(fd);
      return false;
    }
    case control::MsgType::kAttach: {
      auto req = control::decode_attach(frame->payload);
      if (!req) {
        close_passed();
        return refuse(req.error());
      }
      size_t expected = req->output_fd != 0 ? 1 : 0;
      for (const auto& p : req->plugins) expected += p.output_fd != 0 ? 1 : 0;
      if (passed_fds.size() != expected) {
        const size_t arrived = passed_fds.size();
        close_passed();
        return refuse(make_error(FTJIT_E_INVALID_ARGUMENT, "attach: " + std::to_string(expected) +
                                                               " output fds announced, " +
                                                               std::to_string(arrived) + " arrived"));
      }
      control::Reply r = session_.attach(*req, std::move(passed_fds));
      if (r.code == 0) {
        std::lock_guard<std::mutex> lock(send_mu_);
        owner_fd_ = fd;
      }
      bool ok = reply_with(r);
      // Only an attach that took lets a program started by `ftjit run` go
      // on (wait_first_attach): after a refused one, that CLI stops the
      // program, which must not run untraced meanwhile (under load it
      // used to finish before the kill came).
      if (r.code == 0) {
        {
          std::lock_guard<std::mutex> lock(attach_mu_);
          attach_done_ = true;
        }
        attach_cv_.notify_all();
      }
      return ok;
    }
    case control::MsgType::kDetach: {
      auto req = control::decode_detach(frame->payload);
      if (!req) return refuse(req.error());
      control::Reply r = session_.detach(*req);
      if (req->unload && (r.code == 0 || r.code == FTJIT_E_NOT_ATTACHED)) {
        control::Reply u = session_.prepare_unload();
        if (u.code != 0) {
          r.code = u.code;
          r.message = u.message;
        } else {
          r.code = 0;
          r.message = u.message;
          unloading_ = true;
        }
      }
      return reply_with(r);
    }
    case control::MsgType::kFlush:
      return reply_with(session_.flush());
    case control::MsgType::kControl: {
      auto req = control::decode_control(frame->payload);
      if (!req) return refuse(req.error());
      return reply_with(session_.control(*req));
    }
    case control::MsgType::kStatus: {
      auto req = control::decode_status(frame->payload);
      if (!req) return refuse(req.error());
      return reply_with(session_.status(*req));
    }
    default:
      return refuse(make_error(FTJIT_E_INVALID_ARGUMENT, "unexpected message"));
  }
}

}  // namespace ftjit::agent#include "runtime/agent/agent_phase.h"


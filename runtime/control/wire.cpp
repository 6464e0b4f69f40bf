// SPDX-License-Identifier: MIT
// Frames on a Unix stream socket, with an fd passed alongside when asked.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "runtime/control/protocol.h"

namespace ftjit::control {
namespace {

constexpr size_t kHeader = 6;  // u32 length, u16 type

bool known_type(uint16_t t) {
  return t >= static_cast<uint16_t>(MsgType::kHello) && t <= static_cast<uint16_t>(MsgType::kControl);
}

Error sys_error(const char* what) {
  return make_error(FTJIT_E_SYSTEM, std::string(what) + ": " + std::strerror(errno));
}

// Waits until `fd` is readable; false on timeout. Restarts after signals
// with the time that is left.
Status wait_readable(int fd, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int left = -1;
    if (timeout_ms >= 0) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      left = ms < 0 ? 0 : static_cast<int>(ms);
    }
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, left);
    if (n > 0) return {};
    if (n == 0) return make_error(FTJIT_E_SYSTEM, "timed out waiting for the other side");
    if (errno != EINTR) return sys_error("poll");
  }
}

}  // namespace

std::string frame_bytes(MsgType type, std::string_view payload) {
  std::string out(kHeader, '\0');
  uint32_t len = static_cast<uint32_t>(payload.size() + 2);
  uint16_t t = static_cast<uint16_t>(type);
  std::memcpy(out.data(), &len, 4);
  std::memcpy(out.data() + 4, &t, 2);
  out.append(payload);
  return out;
}

Result<Split> split_frame(std::string_view buffer) {
  Split s;
  if (buffer.size() < 4) return s;
  uint32_t len;
  std::memcpy(&len, buffer.data(), 4);
  if (len < 2 || len > kMaxFrame) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "malformed frame: length " + std::to_string(len));
  }
  if (buffer.size() < 4 + size_t{len}) return s;
  uint16_t type;
  std::memcpy(&type, buffer.data() + 4, 2);
  if (!known_type(type)) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "malformed frame: type " + std::to_string(type));
  }
  s.frame.type = static_cast<MsgType>(type);
  s.frame.payload.assign(buffer.substr(kHeader, len - 2));
  s.used = 4 + size_t{len};
  return s;
}

Status send_frame(int fd, MsgType type, std::string_view payload, int pass_fd) {
  return send_frame_fds(fd, type, payload, pass_fd >= 0 ? std::vector<int>{pass_fd} : std::vector<int>{});
}

Status send_frame_fds(int fd, MsgType type, std::string_view payload, const std::vector<int>& pass_fds) {
  if (payload.size() + 2 > kMaxFrame) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "message too large for the control channel");
  }
  if (pass_fds.size() > kMaxPassedFds) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "more than " + std::to_string(kMaxPassedFds) +
                                                    " files for one message of the control channel");
  }
  std::string bytes = frame_bytes(type, payload);
  size_t sent = 0;
  // With the first bytes: the receiver takes them with its first read.
  bool fd_sent = pass_fds.empty();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  while (sent < bytes.size()) {
    iovec iov{bytes.data() + sent, bytes.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fd_sent) {
      const size_t fds_bytes = sizeof(int) * pass_fds.size();
      std::memset(control, 0, sizeof control);
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(fds_bytes);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(fds_bytes);
      std::memcpy(CMSG_DATA(c), pass_fds.data(), fds_bytes);
    }
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) {
        return make_error(FTJIT_E_SYSTEM, "connection closed");
      }
      return sys_error("send");
    }
    fd_sent = true;
    sent += static_cast<size_t>(n);
  }
  return {};
}

Result<Frame> recv_frame(int fd, int timeout_ms, int* received_fd, uint32_t max_len) {
  if (received_fd != nullptr) *received_fd = -1;
  std::vector<int> fds;
  auto frame = recv_frame_fds(fd, timeout_ms, received_fd != nullptr ? &fds : nullptr, max_len);
  // One fd is all such a caller expects: any other is closed, never kept.
  for (size_t i = 0; i < fds.size(); ++i) {
    if (i == 0) {
      *received_fd = fds[0];
    } else {
      ::close(fds[i]);
    }
  }
  return frame;
}

Result<Frame> recv_frame_fds(int fd, int timeout_ms, std::vector<int>* received_fds, uint32_t max_len) {
  if (received_fds != nullptr) received_fds->clear();
  std::string buf;
  char header[kHeader];
  size_t want = kHeader;
  size_t got = 0;
  auto read_some = [&](char* dst, size_t n) -> Result<size_t> {
    FTJIT_TRY(wait_readable(fd, timeout_ms));
    iovec iov{dst, n};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t r = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) return size_t{0};
      if (errno == ECONNRESET) return make_error(FTJIT_E_SYSTEM, "connection closed");
      return sys_error("recv");
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t n_fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n_fds; ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
        // Only a caller who expects fds gets them, at most kMaxPassedFds:
        // anything else is closed, never kept.
        if (received_fds != nullptr && received_fds->size() < kMaxPassedFds) {
          received_fds->push_back(passed);
        } else {
          ::close(passed);
        }
      }
    }
    if (r == 0) return make_error(FTJIT_E_SYSTEM, "connection closed");
    return static_cast<size_t>(r);
  };
  auto fail = [&](Error e) -> Result<Frame> {
    if (received_fds != nullptr) {
      for (int passed : *received_fds) ::close(passed);
      received_fds->clear();
    }
    return e;
  };
  while (got < want) {
    auto n = read_some(header + got, want - got);
    if (!n) return fail(n.take_error());
    got += *n;
  }
  uint32_t len;
  std::memcpy(&len, header, 4);
  if (len < 2 || len > kMaxFrame || len > max_len) {
    return fail(make_error(FTJIT_E_INVALID_ARGUMENT, "malformed frame: length " + std::to_string(len)));
  }
  buf.assign(header, kHeader);
  buf.resize(4 + size_t{len});
  got = kHeader;
  while (got < buf.size()) {
    auto n = read_some(buf.data() + got, buf.size() - got);
    if (!n) return fail(n.take_error());
    got += *n;
  }
  auto split = split_frame(buf);
  if (!split) return fail(split.take_error());
  return std::move(split->frame);
}

std::string socket_dir(uid_t uid) { return "/tmp/ftjit-" + std::to_string(uid); }

std::string socket_path(uid_t uid, int32_t pid) {
  return socket_dir(uid) + "/" + std::to_string(pid) + ".sock";
}

void remove_socket(uid_t uid, const std::string& path) {
  ::unlink(path.c_str());
  (void)::rmdir(socket_dir(uid).c_str());  // ENOTEMPTY: another agent's socket is there
}

}  // namespace ftjit::control

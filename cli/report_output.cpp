// SPDX-License-Identifier: MIT
#include "cli/report_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#ifdef FTJIT_HAVE_PPROF
#include "cli/flame_pprof.h"
#endif

namespace ftjit::cli {
namespace {

// A file in the temporary directory that never has a name, so that no
// way out of the CLI (an error, a signal, a crash) leaves it behind:
// O_TMPFILE, or where the file system lacks it, a name removed at once.
Result<int> open_unnamed_file() {
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/tmp";
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = dir + "/report-json-XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    return make_error(FTJIT_E_SYSTEM, "cannot make a temporary file in " + dir + ": " + std::strerror(errno));
  }
  ::unlink(name.c_str());
  return fd;
}

Result<std::string> read_whole(int fd) {
  std::string text;
  char buf[65536];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(FTJIT_E_SYSTEM, std::string("reading the report back: ") + std::strerror(errno));
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
}

}  // namespace

Result<ReportOutput> ReportOutput::open(const std::string& path, bool pprof) {
#ifndef FTJIT_HAVE_PPROF
  if (pprof) {
    return make_error(FTJIT_E_UNSUPPORTED,
                      "format pprof: this ftjit was built without protobuf and zlib "
                      "(libprotobuf-dev, protobuf-compiler, zlib1g-dev)");
  }
#endif
  ReportOutput out;
  out.path_ = path;
  out.file_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out.file_fd_ < 0) {
    return make_error(FTJIT_E_SYSTEM, "cannot open output '" + path + "': " + std::strerror(errno));
  }
  if (pprof) {
    auto fd = open_unnamed_file();
    if (!fd) return fd.take_error();
    out.json_fd_ = *fd;
  }
  return out;
}

ReportOutput::ReportOutput(ReportOutput&& other) noexcept
    : path_(std::move(other.path_)),
      file_fd_(std::exchange(other.file_fd_, -1)),
      json_fd_(std::exchange(other.json_fd_, -1)) {}

ReportOutput& ReportOutput::operator=(ReportOutput&& other) noexcept {
  // Ours go with `other`, closed when it is.
  std::swap(path_, other.path_);
  std::swap(file_fd_, other.file_fd_);
  std::swap(json_fd_, other.json_fd_);
  return *this;
}

ReportOutput::~ReportOutput() {
  if (file_fd_ >= 0) ::close(file_fd_);
  if (json_fd_ >= 0) ::close(json_fd_);
}

Status ReportOutput::finish() {
  if (json_fd_ < 0) return {};
#ifdef FTJIT_HAVE_PPROF
  auto json = read_whole(json_fd_);
  if (!json) return make_error(FTJIT_E_SYSTEM, path_ + ": " + json.error().message);
  ::close(std::exchange(json_fd_, -1));
  if (auto st = write_flame_pprof(*json, std::exchange(file_fd_, -1), path_); !st) return st;
#endif
  return {};
}

}  // namespace ftjit::cli

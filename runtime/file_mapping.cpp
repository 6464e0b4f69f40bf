// SPDX-License-Identifier: MIT
// FileMapping: open, fstat and mmap of a whole file.
#include "runtime/file_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ftjit {
namespace {

Error system_error(const std::string& path, const char* call, int err) {
  return make_error(FTJIT_E_SYSTEM, path + ": " + call + ": " + std::strerror(err));
}

}  // namespace

Result<std::shared_ptr<const FileMapping>> FileMapping::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return system_error(path, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return system_error(path, "fstat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(FTJIT_E_SYSTEM, path + ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size != 0) {  // an empty span parses to an error
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return system_error(path, "mmap", err);
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const FileMapping>(new FileMapping(data, size));
}

FileMapping::~FileMapping() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ftjit

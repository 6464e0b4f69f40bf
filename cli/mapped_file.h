// SPDX-License-Identifier: MIT
// A file mapped read-only, for the ELF parser (which keeps no copy).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace ftjit::cli {

// The file, mapped read-only for the parser.
class MappedFile {
 public:
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  bool open(const std::string& path, std::string* error) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *error = "cannot open " + path + ": " + std::strerror(errno);
      return false;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
      *error = path + " is not a regular, non-empty file";
      ::close(fd);
      return false;
    }
    size_ = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      *error = "cannot map " + path + ": " + std::strerror(errno);
      return false;
    }
    data_ = p;
    return true;
  }
  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(data_), size_};
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ftjit::cli

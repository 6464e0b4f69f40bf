// SPDX-License-Identifier: MIT
// FileMapping: a whole file mapped read-only, shared by whoever views it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/error.h"

namespace ftjit {

// A read-only private mapping of a whole file. Mapping instead of reading
// keeps large binaries cheap: an ElfImage touches only headers, symbol
// tables and the record sections, so most pages are never faulted in, and
// it views the names and code it keeps instead of copying them: whoever
// keeps those views (a discovered module's sites) shares the mapping.
class FileMapping {
 public:
  // Fails with FTJIT_E_SYSTEM (the path, the call and errno's text) if
  // the file cannot be opened, is not a regular file, or cannot be mapped.
  static Result<std::shared_ptr<const FileMapping>> open(const std::string& path);

  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  FileMapping(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  const uint8_t* data_;  // nullptr for an empty file (mmap rejects length 0)
  size_t size_;
};

}  // namespace ftjit

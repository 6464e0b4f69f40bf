// SPDX-License-Identifier: MIT
#include "cli/module_producers.h"

#include <cstdio>

#include "cli/mapped_file.h"

namespace ftjit::cli {

Result<std::vector<CompileUnitProducer>> read_producers(const std::string& path) {
#if FTJIT_HAVE_LIBDW
  return compile_unit_producers(path);
#else
  (void)path;
  return make_error(FTJIT_E_UNSUPPORTED, "this ftjit was built without libdw: it reads no DWARF");
#endif
}

Result<std::vector<CompileUnitProducer>> read_producers(const ModuleFile& file, const std::string& root) {
  const std::string path = !root.empty() && !file.path.empty() && file.path[0] == '/' ? root + file.path : file.path;
  MappedFile mapped;
  std::string error;
  if (!mapped.open(path, &error)) return make_error(FTJIT_E_SYSTEM, error);
  if (mapped.bytes().size() != file.size || file_fingerprint(mapped.bytes()) != file.fingerprint) {
    return make_error(FTJIT_E_ELF, file.path + ": the file the generator finds there is not the process's (" +
                                       std::to_string(mapped.bytes().size()) + " bytes, the process's " +
                                       std::to_string(file.size) + ")");
  }
  return read_producers(path);
}

}  // namespace ftjit::cli

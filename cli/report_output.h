// SPDX-License-Identifier: MIT
// One report file of `ftjit run`/`attach`, opened by the CLI (the target
// may not see our paths, or be allowed to write there) and handed to the
// agent as an fd. A format the CLI makes itself (pprof, from flame's JSON)
// has the agent write the plugin's JSON into a file without a name, which
// the CLI converts into the real one once the report is complete.
#pragma once

#include <string>

#include "core/error.h"

namespace ftjit::cli {

class ReportOutput {
 public:
  // Opens (truncates) `path`; with `pprof`, also the unnamed file the
  // agent writes the JSON to. Fails naming `path` and the reason, or, in a
  // CLI built without protobuf and zlib, saying pprof is unavailable.
  static Result<ReportOutput> open(const std::string& path, bool pprof);

  ReportOutput(ReportOutput&& other) noexcept;
  ReportOutput& operator=(ReportOutput&& other) noexcept;
  ReportOutput(const ReportOutput&) = delete;
  ReportOutput& operator=(const ReportOutput&) = delete;
  ~ReportOutput();

  // The fd the agent writes to (ours stays open).
  int agent_fd() const { return json_fd_ >= 0 ? json_fd_ : file_fd_; }
  const std::string& path() const { return path_; }

  // The report is complete (the agent closed its copy): converts it where
  // the CLI makes the format. Fails naming the file and the reason.
  Status finish();

 private:
  ReportOutput() = default;

  std::string path_;
  int file_fd_ = -1;  // the user's file
  int json_fd_ = -1;  // pprof: flame's JSON, in a file that has no name
};

}  // namespace ftjit::cli

// SPDX-License-Identifier: MIT
// What a numeric option accepts, and the one line that says so when a
// value is refused: "--duration 0: must be a number of seconds > 0 (at
// most 31536000, a year)" instead of CLI11's range with 300 digits.
//
// The checks run on the text, before CLI11 converts it, so "abc", "-3" and
// "1e999" get the same sentence as an out-of-range number. A refusal is
// the whole line less the command; CLI11 puts "NAME: " in front of it,
// which exit_on_parse_error() takes off again (the line names the option).
//
// Header-only: ftjit-bench (bench/), which `ftjit bench` runs, uses it too.
#pragma once

#include <CLI/CLI.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ftjit::cli {

// The largest pid or tid Linux hands out (PID_MAX_LIMIT on 64-bit).
inline constexpr long long kMaxProcessId = 4'194'304;
// --duration: a year is longer than anyone means; it keeps the deadline
// arithmetic far from overflow.
inline constexpr double kMaxDurationSeconds = 31'536'000;

namespace detail {

inline std::string shown_value(const std::string& text) { return text.empty() ? "''" : text; }

// The whole of `text` as a base-10 integer (an optional sign, digits).
inline bool parse_whole_number(const std::string& text, long long* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

// The whole of `text` as a finite decimal number.
inline bool parse_finite_number(const std::string& text, double* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// The whole of `text` as a byte count: digits, then an optional binary
// unit K, M or G (KiB, MiB, GiB; either case; "B" alone or after the unit
// is allowed). False for anything else, or a count that overflows.
inline bool parse_byte_size(const std::string& text, unsigned long long* out) {
  size_t i = 0;
  unsigned long long v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const unsigned digit = static_cast<unsigned>(text[i] - '0');
    if (v > (~0ull - digit) / 10) return false;
    v = v * 10 + digit;
    ++i;
  }
  if (i == 0) return false;
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  unsigned shift = 0;
  if (unit == "" || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KB" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    shift = 30;
  } else {
    return false;
  }
  if (shift != 0 && v > (~0ull >> shift)) return false;
  *out = v << shift;
  return true;
}

}  // namespace detail

// `opt` accepts a byte count (detail::parse_byte_size) from `min` to `max`.
inline CLI::Option* accept_byte_size(CLI::Option* opt, unsigned long long min,
                                     unsigned long long max, const std::string& allowed) {
  const std::string name = opt->get_name();
  opt->check(CLI::Validator(
      [name, min, max, allowed](std::string& text) -> std::string {
        unsigned long long v = 0;
        if (!detail::parse_byte_size(text, &v) || v < min || v > max) {
          return name + " " + detail::shown_value(text) + ": must be " + allowed;
        }
        return {};
      },
      "", ""));
  return opt;
}

// `opt` accepts a whole number from `min` to `max`; a refusal reads
// "NAME VALUE: must be ALLOWED". The name is the option's long one.
inline CLI::Option* accept_whole_number(CLI::Option* opt, long long min, long long max,
                                        const std::string& allowed) {
  const std::string name = opt->get_name();
  opt->check(CLI::Validator(
      [name, min, max, allowed](std::string& text) -> std::string {
        long long v = 0;
        if (!detail::parse_whole_number(text, &v) || v < min || v > max) {
          return name + " " + detail::shown_value(text) + ": must be " + allowed;
        }
        return {};
      },
      "", ""));
  return opt;
}

// A process (or thread) id: a whole number from 1 to kMaxProcessId.
inline CLI::Option* accept_process_id(CLI::Option* opt, const std::string& what = "a process id") {
  return accept_whole_number(opt, 1, kMaxProcessId,
                             what + ", a whole number from 1 to " + std::to_string(kMaxProcessId));
}

// A number of seconds > 0 (fractions allowed) and at most `max`
// (kMaxDurationSeconds: "a year"), said as `max_said`.
inline CLI::Option* accept_positive_seconds(CLI::Option* opt, double max = kMaxDurationSeconds,
                                            const std::string& max_said = "a year") {
  const std::string name = opt->get_name();
  opt->check(CLI::Validator(
      [name, max, max_said](std::string& text) -> std::string {
        double v = 0;
        if (!detail::parse_finite_number(text, &v) || !(v > 0) || v > max) {
          return name + " " + detail::shown_value(text) +
                 ": must be a number of seconds > 0 (at most " +
                 std::to_string(static_cast<long long>(max)) + ", " + max_said + ")";
        }
        return {};
      },
      "", ""));
  return opt;
}

// What main() prints for a command line CLI11 refused: one line, "PROGRAM
// SUBCOMMAND: MESSAGE", and the exit status. Help and --version still go
// through CLI::App::exit (their text is the result, on stdout).
inline int exit_on_parse_error(const CLI::App& app, const CLI::ParseError& e,
                               const std::string& program) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    return const_cast<CLI::App&>(app).exit(e);
  }
  std::string who = program;
  // The deepest subcommand reached names the command in the message.
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().back();
    who += " " + sub->get_name();
  }
  std::string message = e.what();
  // "--pid: --pid 0: must be..." (CLI11's name, then ours): keep ours.
  if (const size_t colon = message.find(": "); colon != std::string::npos &&
      message.compare(colon + 2, colon + 1, message.substr(0, colon) + " ") == 0) {
    message.erase(0, colon + 2);
  }
  std::fprintf(stderr, "%s: %s\n", who.c_str(), message.c_str());
  return e.get_exit_code();
}

}  // namespace ftjit::cli

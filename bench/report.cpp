// SPDX-License-Identifier: MIT
// JSON and text rendering of ftjit-bench results, and the machine header.
#include "bench/report.h"

#include <sys/utsname.h>

#include <algorithm>
#include <fstream>
#include <thread>

namespace ftjit_bench {

Row &Row::set(std::string key, Value value) {
  for (auto &[k, v] : fields_) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  fields_.emplace_back(std::move(key), std::move(value));
  return *this;
}

Table &Report::table(const std::string &key, const std::string &title) {
  for (auto &t : tables_) {
    if (t.key == key) return t;
  }
  tables_.push_back(Table{key, title, {}, {}, {}});
  return tables_.back();
}

const Table *Report::find(const std::string &key) const {
  for (const auto &t : tables_) {
    if (t.key == key) return &t;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

namespace {

void write_json_string(std::FILE *out, const std::string &s) {
  std::fputc('"', out);
  for (const unsigned char c : s) {
    switch (c) {
      case '"':
        std::fputs("\\\"", out);
        break;
      case '\\':
        std::fputs("\\\\", out);
        break;
      case '\n':
        std::fputs("\\n", out);
        break;
      case '\t':
        std::fputs("\\t", out);
        break;
      default:
        if (c < 0x20) {
          std::fprintf(out, "\\u%04x", c);
        } else {
          std::fputc(c, out);
        }
    }
  }
  std::fputc('"', out);
}

void write_json_value(std::FILE *out, const Value &v) {
  if (std::holds_alternative<std::monostate>(v)) {
    std::fputs("null", out);
  } else if (const bool *b = std::get_if<bool>(&v)) {
    std::fputs(*b ? "true" : "false", out);
  } else if (const std::int64_t *i = std::get_if<std::int64_t>(&v)) {
    std::fprintf(out, "%lld", static_cast<long long>(*i));
  } else if (const double *d = std::get_if<double>(&v)) {
    std::fprintf(out, "%.3f", *d);
  } else {
    write_json_string(out, std::get<std::string>(v));
  }
}

void write_json_row(std::FILE *out, const Row &row) {
  std::fputc('{', out);
  bool first = true;
  for (const auto &[key, value] : row.fields()) {
    if (!first) std::fputs(", ", out);
    first = false;
    write_json_string(out, key);
    std::fputs(": ", out);
    write_json_value(out, value);
  }
  std::fputc('}', out);
}

void write_json_strings(std::FILE *out, const std::vector<std::string> &list) {
  std::fputc('[', out);
  for (size_t i = 0; i < list.size(); ++i) {
    if (i != 0) std::fputs(", ", out);
    write_json_string(out, list[i]);
  }
  std::fputc(']', out);
}

}  // namespace

void Report::write_json(std::FILE *out) const {
  std::fputs("{\n  \"meta\": ", out);
  write_json_row(out, meta_);
  for (const auto &t : tables_) {
    std::fputs(",\n  ", out);
    write_json_string(out, t.key);
    std::fputs(": [", out);
    for (size_t i = 0; i < t.rows.size(); ++i) {
      std::fputs(i == 0 ? "\n    " : ",\n    ", out);
      write_json_row(out, t.rows[i]);
    }
    std::fputs(t.rows.empty() ? "]" : "\n  ]", out);
  }
  std::fputs(",\n  \"notes\": {", out);
  bool first = true;
  for (const auto &t : tables_) {
    if (t.notes.empty()) continue;
    std::fputs(first ? "\n    " : ",\n    ", out);
    first = false;
    write_json_string(out, t.key);
    std::fputs(": ", out);
    write_json_strings(out, t.notes);
  }
  std::fputs(first ? "}" : "\n  }", out);
  std::fputs(",\n  \"errors\": ", out);
  write_json_strings(out, errors_);
  std::fputs("\n}\n", out);
}

// ---------------------------------------------------------------------------
// Text tables
// ---------------------------------------------------------------------------

namespace {

std::string format_value(const Value &v) {
  char buf[64];
  if (std::holds_alternative<std::monostate>(v)) return "n/a";
  if (const bool *b = std::get_if<bool>(&v)) return *b ? "yes" : "no";
  if (const std::int64_t *i = std::get_if<std::int64_t>(&v)) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(*i));
    return buf;
  }
  if (const double *d = std::get_if<double>(&v)) {
    // Two decimals below 100 (ns per call), none above (total ns): the
    // readable table is for eyes; JSON keeps more.
    std::snprintf(buf, sizeof buf, *d < 100.0 && *d > -100.0 ? "%.2f" : "%.0f", *d);
    return buf;
  }
  return std::get<std::string>(v);
}

bool is_numeric(const Value &v) {
  return std::holds_alternative<std::int64_t>(v) || std::holds_alternative<double>(v);
}

void write_table(std::FILE *out, const Table &t) {
  std::fprintf(out, "\n== %s ==\n", t.title.c_str());
  if (t.rows.empty()) {
    std::fputs("(no rows)\n", out);
  } else {
    // Columns: the chosen ones, else the union of the rows' keys in
    // first-seen order.
    std::vector<std::string> columns = t.text_columns;
    if (columns.empty()) {
      for (const auto &row : t.rows) {
        for (const auto &field : row.fields()) {
          if (std::find(columns.begin(), columns.end(), field.first) == columns.end()) {
            columns.push_back(field.first);
          }
        }
      }
    }
    std::vector<std::vector<std::string>> cells;
    std::vector<std::vector<bool>> right;
    std::vector<size_t> width(columns.size());
    for (size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
    for (const auto &row : t.rows) {
      std::vector<std::string> line(columns.size());
      std::vector<bool> align(columns.size(), false);
      for (size_t c = 0; c < columns.size(); ++c) {
        const auto &f = row.fields();
        auto it =
            std::find_if(f.begin(), f.end(), [&](const auto &p) { return p.first == columns[c]; });
        line[c] = it == f.end() ? "" : format_value(it->second);
        align[c] = it != f.end() && is_numeric(it->second);
        width[c] = std::max(width[c], line[c].size());
      }
      cells.push_back(std::move(line));
      right.push_back(std::move(align));
    }
    // The last column is left unpadded (no trailing blanks) unless numeric.
    const size_t last = columns.size() - 1;
    for (size_t c = 0; c < columns.size(); ++c) {
      std::fprintf(out, "%s%-*s", c == 0 ? "" : "  ", c == last ? 0 : static_cast<int>(width[c]),
                   columns[c].c_str());
    }
    std::fputc('\n', out);
    for (size_t c = 0; c < columns.size(); ++c) {
      std::fprintf(out, "%s%s", c == 0 ? "" : "  ", std::string(width[c], '-').c_str());
    }
    std::fputc('\n', out);
    for (size_t r = 0; r < cells.size(); ++r) {
      for (size_t c = 0; c < columns.size(); ++c) {
        const bool pad = right[r][c] || c != last;
        std::fprintf(out, right[r][c] ? "%s%*s" : "%s%-*s", c == 0 ? "" : "  ",
                     pad ? static_cast<int>(width[c]) : 0, cells[r][c].c_str());
      }
      std::fputc('\n', out);
    }
  }
  for (const auto &note : t.notes) std::fprintf(out, "  * %s\n", note.c_str());
  if (!t.text_columns.empty()) std::fputs("  * --json shows every column\n", out);
}

}  // namespace

void Report::write_text(std::FILE *out) const {
  std::fputs("ftjit-bench", out);
  for (const auto &[key, value] : meta_.fields()) {
    std::fprintf(out, "\n  %-14s %s", key.c_str(), format_value(value).c_str());
  }
  std::fputc('\n', out);
  for (const auto &t : tables_) write_table(out, t);
  if (!errors_.empty()) {
    std::fprintf(out, "\n== ERRORS (%zu) ==\n", errors_.size());
    for (const auto &e : errors_) std::fprintf(out, "  %s\n", e.c_str());
  }
}

// ---------------------------------------------------------------------------
// Machine header
// ---------------------------------------------------------------------------

Row machine_info() {
  Row row;
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) cpu = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  row.set("cpu", cpu);
  row.set("cores", static_cast<long>(std::thread::hardware_concurrency()));
  utsname u{};
  if (uname(&u) == 0) {
    row.set("kernel", std::string(u.sysname) + " " + u.release);
    row.set("machine", u.machine);
  }
#ifdef __VERSION__
  row.set("compiler", __VERSION__);
#endif
  return row;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  if (!(in >> load)) return -1;
  return load;
}

}  // namespace ftjit_bench

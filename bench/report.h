// SPDX-License-Identifier: MIT
// Result rows of ftjit-bench and their two renderings: a JSON document and
// readable tables. Sections fill rows; only this file knows output formats.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ftjit_bench {

// One cell. monostate renders as JSON null and as "n/a" in a table.
using Value = std::variant<std::monostate, bool, std::int64_t, double, std::string>;

// An ordered list of (key, value): the order is the table's column order.
class Row {
 public:
  Row &set(std::string key, Value value);
  // Convenience overloads so call sites need no casts.
  Row &set(std::string key, bool value) { return set(std::move(key), Value(value)); }
  Row &set(std::string key, double value) { return set(std::move(key), Value(value)); }
  Row &set(std::string key, int value) { return set(std::move(key), Value(std::int64_t{value})); }
  Row &set(std::string key, long value) { return set(std::move(key), Value(std::int64_t{value})); }
  Row &set(std::string key, unsigned long value) {
    return set(std::move(key), Value(static_cast<std::int64_t>(value)));
  }
  Row &set(std::string key, const char *value) {
    return set(std::move(key), Value(std::string(value)));
  }

  const std::vector<std::pair<std::string, Value>> &fields() const { return fields_; }
  // The value set for `key`; nullptr if none was.
  const Value *get(const std::string &key) const {
    for (const auto &[k, v] : fields_) {
      if (k == key) return &v;
    }
    return nullptr;
  }

 private:
  std::vector<std::pair<std::string, Value>> fields_;
};

// One titled table: the rows of one section (or of one part of a section).
struct Table {
  std::string key;    // JSON member name, e.g. "calls"
  std::string title;  // heading of the readable table
  std::vector<Row> rows;
  std::vector<std::string> notes;  // printed under the table / as "notes"
  // Columns of the readable table when not all of them (JSON has every
  // column): keeps wide sections within a terminal.
  std::vector<std::string> text_columns;
};

// Everything one run produced.
class Report {
 public:
  Table &table(const std::string &key, const std::string &title);
  // The table of `key` if a section of this run made it, else nullptr.
  const Table *find(const std::string &key) const;
  void add_error(std::string message) { errors_.push_back(std::move(message)); }
  bool failed() const { return !errors_.empty(); }
  Row &meta() { return meta_; }

  // One JSON object: {"meta":{...}, "<table key>":[rows], "notes":{...},
  // "errors":[...]}. Doubles keep 3 decimals.
  void write_json(std::FILE *out) const;
  // Aligned text tables, one per Table, then the errors.
  void write_text(std::FILE *out) const;

 private:
  Row meta_;
  std::vector<Table> tables_;
  std::vector<std::string> errors_;
};

// Machine facts for the report header: cpu model, cores, kernel, compiler.
Row machine_info();

// The 1-minute load average from /proc/loadavg, or -1: a busy machine
// (another build on the same cores) shows up as bimodal ns-per-call rows.
double load_average();

}  // namespace ftjit_bench

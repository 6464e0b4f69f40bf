// SPDX-License-Identifier: MIT
// flame's JSON report as a pprof profile (flame_pprof.h): encoded by
// libprotobuf from cli/proto/pprof_profile.proto, gzipped by zlib.
#include "cli/flame_pprof.h"

#include <zlib.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

#include "pprof_profile.pb.h"  // generated from cli/proto/pprof_profile.proto

namespace ftjit::cli {
namespace {

using nlohmann::json;

// Indexes into the profile's string table, each string once; [0] is ""
// (the format reserves it).
class StringTable {
 public:
  explicit StringTable(pprof::Profile* profile) : profile_(profile) { (void)index(""); }

  int64_t index(const std::string& s) {
    auto [it, added] = ids_.emplace(s, static_cast<int64_t>(ids_.size()));
    if (added) profile_->add_string_table(s);
    return it->second;
  }

 private:
  pprof::Profile* profile_;
  std::map<std::string, int64_t> ids_;
};

// One Function and one Location per distinct frame name: flame knows names,
// not addresses, and pprof merges by location id.
class Frames {
 public:
  Frames(pprof::Profile* profile, StringTable* strings) : profile_(profile), strings_(strings) {}

  uint64_t location_of(const std::string& name) {
    auto [it, added] = ids_.emplace(name, ids_.size() + 1);  // ids are non-zero
    if (added) {
      pprof::Function* f = profile_->add_function();
      f->set_id(it->second);
      f->set_name(strings_->index(name));
      f->set_system_name(f->name());
      pprof::Location* l = profile_->add_location();
      l->set_id(it->second);
      l->add_line()->set_function_id(it->second);
    }
    return it->second;
  }

 private:
  pprof::Profile* profile_;
  StringTable* strings_;
  std::map<std::string, uint64_t> ids_;
};

int64_t number_of(const json& stack, const char* key) {
  const auto it = stack.find(key);
  if (it == stack.end() || !it->is_number_unsigned()) {
    throw std::runtime_error(std::string("a stack without a count \"") + key + "\"");
  }
  const uint64_t v = it->get<uint64_t>();
  if (v > static_cast<uint64_t>(INT64_MAX)) throw std::runtime_error(std::string("\"") + key + "\" out of range");
  return static_cast<int64_t>(v);
}

Result<std::string> encode(std::string_view flame_json) {
  pprof::Profile profile;
  try {
    const json doc = json::parse(flame_json);
    if (!doc.is_object() || !doc.contains("stacks") || !doc["stacks"].is_array()) {
      throw std::runtime_error("no \"stacks\" list");
    }
    const std::string unit = doc.value("unit", std::string());
    if (unit != "ns" && unit != "calls") throw std::runtime_error("unit '" + unit + "', not ns or calls");
    const bool by_time = unit == "ns";
    StringTable strings(&profile);
    auto add_type = [&](const char* type, const char* type_unit) {
      pprof::ValueType* t = profile.add_sample_type();
      t->set_type(strings.index(type));
      t->set_unit(strings.index(type_unit));
    };
    add_type("samples", "count");
    if (by_time) add_type("time", "nanoseconds");
    // Viewers open the time view by default: the one a flame graph by time shows.
    profile.set_default_sample_type(profile.sample_type(by_time ? 1 : 0).type());
    Frames frames(&profile, &strings);
    for (const json& s : doc["stacks"]) {
      const auto names = s.find("frames");
      if (names == s.end() || !names->is_array() || names->empty()) throw std::runtime_error("a stack without frames");
      const int64_t calls = number_of(s, "calls");
      const int64_t self_ns = by_time ? number_of(s, "self_ns") : 0;
      if (calls == 0 && self_ns == 0) continue;
      pprof::Sample* sample = profile.add_sample();
      // pprof lists a sample's stack from the leaf to the root.
      for (auto f = names->rbegin(); f != names->rend(); ++f) {
        if (!f->is_string()) throw std::runtime_error("a frame that is not a name");
        sample->add_location_id(frames.location_of(f->get<std::string>()));
      }
      sample->add_value(calls);
      if (by_time) sample->add_value(self_ns);
    }
  } catch (const std::exception& e) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, std::string("flame's report is not its JSON: ") + e.what());
  }
  profile.set_time_nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
  std::string bytes;
  if (!profile.SerializeToString(&bytes)) return make_error(FTJIT_E_INTERNAL, "pprof: the profile did not encode");
  return bytes;
}

}  // namespace

Status write_flame_pprof(std::string_view flame_json, int fd, const std::string& path) {
  auto bytes = encode(flame_json);
  if (!bytes) {
    ::close(fd);
    return make_error(bytes.error().code, path + ": " + bytes.error().message);
  }
  // pprof files are gzip streams (what `go tool pprof` looks for first).
  gzFile out = gzdopen(fd, "wb9");
  if (out == nullptr) {
    ::close(fd);
    return make_error(FTJIT_E_SYSTEM, "writing '" + path + "': " + std::strerror(errno));
  }
  bool written = true;
  // gzwrite takes an unsigned count: a large profile goes in pieces.
  for (size_t at = 0; at < bytes->size() && written; at += 1u << 30) {
    const unsigned n = static_cast<unsigned>(std::min<size_t>(bytes->size() - at, 1u << 30));
    written = gzwrite(out, bytes->data() + at, n) == static_cast<int>(n);
  }
  int err = Z_OK;
  const char* why = written ? nullptr : gzerror(out, &err);
  std::string message = why != nullptr ? why : "";
  const int closed = gzclose(out);
  if (!written || closed != Z_OK) {
    if (message.empty()) message = closed == Z_ERRNO ? std::strerror(errno) : "gzip failed";
    return make_error(FTJIT_E_SYSTEM, "writing '" + path + "': " + message);
  }
  return {};
}

}  // namespace ftjit::cli

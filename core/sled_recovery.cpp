// SPDX-License-Identifier: MIT
// recover_unrecorded_sites: learns the module's sled from its records or producers, then finds it at unrecorded functions.
#include "core/sled_recovery.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/site_discovery.h"
#include "core/sled_layout.h"

namespace ftjit {
namespace {

constexpr uint32_t kEfRiscvRvc = 0x0001;  // EF_RISCV_RVC: not in every <elf.h>

// No supported layout puts more NOPs at the entry than this (x86-64 =13,8
// has 5 bytes there, riscv64 =8,4 four c.nop, arm64 =4,2 two words); a
// function whose entry shows more NOP bytes than this is no sled's.
constexpr uint64_t kMaxEntryNopBytes = 64;

// One layout, in bytes: what lies before the symbol and at the entry.
struct SledBytes {
  std::vector<uint8_t> before;  // the M NOPs before the symbol
  std::vector<uint8_t> entry;   // the N-M NOPs at the entry (symbol + pad)

  bool operator==(const SledBytes&) const = default;
};

// How many NOPs `bytes` (a whole number of NOPs) are, as the flag counts
// them: bytes on x86-64 (GCC's =5 is five 0x90, clang's one 5-byte NOP),
// instructions elsewhere (arm64 =2 is two words, riscv64 =8,4 eight c.nop).
uint32_t flag_units(Isa isa, std::span<const uint8_t> bytes) {
  if (isa == Isa::kX86_64) return static_cast<uint32_t>(bytes.size());
  uint32_t count = 0;
  for (size_t at = 0; at < bytes.size(); ++count) {
    const uint32_t length = nop_length(isa, bytes.subspan(at));
    if (length == 0) break;
    at += length;
  }
  return count;
}

// The bytes of the NOP instructions `code` starts with (none: 0).
uint64_t leading_nop_bytes(Isa isa, std::span<const uint8_t> code) {
  uint64_t at = 0;
  while (at < code.size()) {
    const uint32_t length = nop_length(isa, code.subspan(at));
    if (length == 0) break;
    at += length;
  }
  return at;
}

// -fpatchable-function-entry=N[,M] as a compile unit's producer records it.
struct FlagValue {
  uint32_t total = 0;   // N
  uint32_t before = 0;  // M

  auto operator<=>(const FlagValue&) const = default;
};

std::string flag_text(const FlagValue& f) {
  std::string text = "=" + std::to_string(f.total);
  if (f.before != 0) text += "," + std::to_string(f.before);
  return text;
}

// The value of the last -fpatchable-function-entry= on the command line
// (the one GCC uses); nullopt when there is none or it does not parse.
std::optional<FlagValue> producer_flag(std::string_view producer) {
  constexpr std::string_view kOption = " -fpatchable-function-entry=";
  const size_t at = producer.rfind(kOption);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = producer.substr(at + kOption.size());
  rest = rest.substr(0, rest.find(' '));
  FlagValue value;
  const char* end = rest.data() + rest.size();
  auto [p, ec] = std::from_chars(rest.data(), end, value.total);
  if (ec != std::errc()) return std::nullopt;
  if (p != end) {
    if (*p != ',') return std::nullopt;
    auto [q, ec2] = std::from_chars(p + 1, end, value.before);
    if (ec2 != std::errc() || q != end) return std::nullopt;
  }
  if (value.before > value.total) return std::nullopt;
  return value;
}

// What the GCC compile units say: how many name the flag, and its values.
struct ProducerEvidence {
  size_t units = 0;
  std::set<FlagValue> values;
};

ProducerEvidence producer_evidence(const std::vector<CompileUnitProducer>& units) {
  ProducerEvidence evidence;
  for (const CompileUnitProducer& u : units) {
    const std::string_view p = u.producer;
    // Only GCC records its options; assembler units have none to record.
    if (!u.has_code || !p.starts_with("GNU ") || p.starts_with("GNU AS ")) continue;
    if (auto value = producer_flag(p)) {
      ++evidence.units;
      evidence.values.insert(*value);
    }
  }
  return evidence;
}

// GCC's sled for the flag's value: its one NOP of the ISA, repeated.
std::optional<SledBytes> gcc_sled(Isa isa, uint32_t elf_flags, const FlagValue& flag) {
  if (flag.total > kMaxEntryNopBytes) return std::nullopt;  // no sled is that long
  std::vector<uint8_t> nop;
  switch (isa) {
    case Isa::kX86_64: nop = {0x90}; break;
    case Isa::kArm64: nop = {0x1f, 0x20, 0x03, 0xd5}; break;
    case Isa::kRiscv64:
      nop = (elf_flags & kEfRiscvRvc) != 0 ? std::vector<uint8_t>{0x01, 0x00}
                                           : std::vector<uint8_t>{0x13, 0x00, 0x00, 0x00};
      break;
    case Isa::kUnknown: return std::nullopt;
  }
  SledBytes sled;
  for (uint32_t i = 0; i < flag.total; ++i) {
    auto& part = i < flag.before ? sled.before : sled.entry;
    part.insert(part.end(), nop.begin(), nop.end());
  }
  return sled;
}

// Link-time addresses of the module's named sites, as found so far.
struct NamedRecordSite {
  uint64_t record, symbol, entry;
};

// Sites recovered before show no layout of their own: only records do.
std::vector<NamedRecordSite> named_sites(const DiscoveredModule& module) {
  std::vector<NamedRecordSite> out;
  for (const DiscoveredSite& s : module.sites) {
    if ((s.symbol() == 0 && s.name.empty()) || s.recovered) continue;
    out.push_back({s.record() - module.load_bias, s.symbol() - module.load_bias,
                   s.entry - module.load_bias});
  }
  return out;
}

// The one layout the named records show, or why there is none.
struct LayoutFromRecords {
  std::optional<SledBytes> sled;
  std::string disagreement;  // set when records show more than one layout
};

LayoutFromRecords records_layout(std::span<const uint8_t> file, const ElfImage& image,
                                 const std::vector<NamedRecordSite>& sites) {
  LayoutFromRecords out;
  if (sites.empty()) return out;
  const Isa isa = image.isa();
  std::optional<std::vector<uint8_t>> before;
  std::vector<std::span<const uint8_t>> entries;  // each record's NOPs at its entry
  for (const NamedRecordSite& s : sites) {
    // =N,0 after a landing pad points past the pad: nothing lies before.
    const uint64_t before_bytes = s.symbol >= s.record ? s.symbol - s.record : 0;
    const auto prefix = image.code_in_file(file, s.symbol - before_bytes, before_bytes);
    if (prefix.size() != before_bytes || leading_nop_bytes(isa, prefix) != before_bytes) {
      out.disagreement = "a record's bytes before its symbol are not NOPs";
      return out;
    }
    if (!before) {
      before.emplace(prefix.begin(), prefix.end());
    } else if (!std::equal(prefix.begin(), prefix.end(), before->begin(), before->end())) {
      out.disagreement = "records differ in the NOPs before the symbol";
      return out;
    }
    const auto code = image.code_in_file(file, s.entry, kMaxEntryNopBytes + 1);
    const uint64_t nops = leading_nop_bytes(isa, code);
    if (nops == 0 || nops > kMaxEntryNopBytes) {
      out.disagreement = "a record's entry is no sled";
      return out;
    }
    entries.push_back(code.first(nops));
  }
  // The sled is what most entries show; more NOPs at a few entries are
  // alignment padding the body starts with, fewer a different layout.
  const auto shortest = *std::min_element(
      entries.begin(), entries.end(), [](auto a, auto b) { return a.size() < b.size(); });
  size_t exactly = 0;
  for (const auto& e : entries) {
    if (!std::equal(shortest.begin(), shortest.end(), e.begin(), e.begin() + shortest.size())) {
      out.disagreement = "records differ in the NOPs at the entry";
      return out;
    }
    exactly += e.size() == shortest.size();
  }
  if (exactly * 2 <= entries.size()) {
    out.disagreement = "records differ in how many NOPs are at the entry";
    return out;
  }
  out.sled = SledBytes{std::move(*before), {shortest.begin(), shortest.end()}};
  return out;
}

FlagValue flag_of(Isa isa, const SledBytes& sled) {
  const uint32_t before = flag_units(isa, sled.before);
  return {before + flag_units(isa, sled.entry), before};
}

// Whether function `f` (link-time) carries `sled` and may be taken; its
// landing pad through `pad`.
bool carries_sled(std::span<const uint8_t> file, const ElfImage& image, const ElfSymbol& f,
                  const SledBytes& sled, uint32_t* pad) {
  const Isa isa = image.isa();
  *pad = landing_pad_bytes(isa, image.code_in_file(file, f.value, 4));
  const uint64_t sled_end = uint64_t{*pad} + sled.entry.size();
  if (f.size <= sled_end) return false;  // a function is more than its sled
  // Past the sled, within the function: an instruction that is no NOP.
  const uint64_t rest = std::min<uint64_t>(f.size - sled_end, 16);
  const auto code = image.code_in_file(file, f.value + *pad, sled.entry.size() + rest);
  if (code.size() != sled.entry.size() + rest) return false;
  if (!std::equal(sled.entry.begin(), sled.entry.end(), code.begin())) return false;
  if (nop_length(isa, code.subspan(sled.entry.size())) != 0) return false;
  if (sled.before.empty()) return true;
  if (f.value < sled.before.size()) return false;
  const auto prefix = image.code_in_file(file, f.value - sled.before.size(), sled.before.size());
  return std::equal(prefix.begin(), prefix.end(), sled.before.begin(), sled.before.end());
}

// The link-time symbols of the module's named sites, sorted.
// (A bulk array: a million of them are 8 MB, in huge pages rather than two
// thousand page faults.)
BulkVector<uint64_t> owned_symbols(const DiscoveredModule& module) {
  BulkVector<uint64_t> owned;
  owned.reserve(module.sites.size());
  for (const DiscoveredSite& s : module.sites) {
    if (s.symbol() != 0 || !s.name.empty()) owned.push_back(s.symbol() - module.load_bias);
  }
  if (!std::is_sorted(owned.begin(), owned.end())) std::sort(owned.begin(), owned.end());  // sites come by entry
  return owned;
}

// Whether a function that could be a site (not an IFUNC, sized, in code)
// is none yet. Functions and the owned symbols are both sorted: one forward
// walk.
bool any_unowned_function(const ElfImage& image, const BulkVector<uint64_t>& owned) {
  auto next_owned = owned.begin();
  for (const ElfSymbol& f : image.functions()) {
    if (f.ifunc || f.size == 0 || !f.in_code_section) continue;
    while (next_owned != owned.end() && *next_owned < f.value) ++next_owned;
    if (next_owned == owned.end() || *next_owned != f.value) return true;
  }
  return false;
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

void recover_unrecorded_sites(std::span<const uint8_t> file, const ElfImage& image,
                              const std::vector<CompileUnitProducer>& units,
                              DiscoveredModule& module) {
  if (!image.has_patchable_section()) return;
  // Most modules keep every record: when each function that could carry a
  // sled is a site already there is nothing to recover, and the layout
  // need not be read from a million records to find that out.
  const BulkVector<uint64_t> owned = owned_symbols(module);  // symbols that are sites already
  if (!any_unowned_function(image, owned)) return;
  const Isa isa = image.isa();
  const std::vector<NamedRecordSite> recorded = named_sites(module);
  const ProducerEvidence producers = producer_evidence(units);
  if (producers.values.size() > 1) return;  // units built with different layouts

  std::optional<SledBytes> sled;
  if (!recorded.empty()) {
    LayoutFromRecords layout = records_layout(file, image, recorded);
    if (!layout.sled) return;
    sled = std::move(layout.sled);
    if (!producers.values.empty() && *producers.values.begin() != flag_of(isa, *sled)) return;
  } else if (!producers.values.empty()) {
    sled = gcc_sled(isa, image.flags(), *producers.values.begin());
  }
  // A site's prefix (its landing pad and the NOPs before its symbol) is
  // bounded for every site alike; a producer may name any value.
  if (!sled || sled->entry.empty() || sled->entry.size() > kMaxEntryNopBytes ||
      sled->before.size() + arm64::kLandingPadBytes > kMaxSitePrefixBytes) {
    return;
  }

  const auto& records = image.patchable_records();
  auto record_near = [&](uint64_t from, uint64_t to) {  // is a record in [from, to)?
    auto it = std::lower_bound(records.begin(), records.end(), from);
    return it != records.end() && *it < to;
  };

  const auto& functions = image.functions();
  // Functions come by value: one forward walk over `owned` answers them
  // all (no binary search, which a million sites made most of the cost).
  auto next_owned = owned.begin();
  auto is_owned = [&](uint64_t value) {
    while (next_owned != owned.end() && *next_owned < value) ++next_owned;
    return next_owned != owned.end() && *next_owned == value;
  };
  uint64_t code_end = 0;  // where the functions seen so far end
  BulkVector<DiscoveredSite> found;
  for (size_t i = 0; i < functions.size();) {
    // Aliases share a value; the first one that qualifies names the site.
    size_t next = i;
    const ElfSymbol* chosen = nullptr;
    uint64_t longest = 0;
    for (; next < functions.size() && functions[next].value == functions[i].value; ++next) {
      const ElfSymbol& f = functions[next];
      longest = std::max(longest, f.size);
      if (chosen == nullptr && !f.ifunc && f.size != 0 && f.in_code_section) chosen = &f;
    }
    const uint64_t value = functions[i].value;
    const uint64_t previous_end = code_end;
    code_end = std::max(code_end, value + longest);
    i = next;
    if (chosen == nullptr || is_owned(value)) continue;
    // The NOPs before the symbol must be this function's, not another's end.
    if (value < sled->before.size() || previous_end > value - sled->before.size()) continue;
    // A record inside it or its prefix, which no symbol owned: not ours to
    // guess about.
    if (record_near(value - sled->before.size(), value + chosen->size)) continue;
    uint32_t pad = 0;
    if (!carries_sled(file, image, *chosen, *sled, &pad)) continue;
    const uint64_t record = sled->before.empty() ? value + pad : value - sled->before.size();
    DiscoveredSite site = named_site(record, *chosen, pad, module);
    site.recovered = true;
    found.push_back(std::move(site));
  }
  if (found.empty()) return;

  const FlagValue flag = flag_of(isa, *sled);
  std::string evidence;
  if (!recorded.empty()) evidence = "records of " + plural(recorded.size(), "other function", "other functions");
  if (producers.units != 0) {
    if (!evidence.empty()) evidence += "; ";
    evidence += "DW_AT_producer of " + plural(producers.units, "compile unit", "compile units");
  }
  module.recovered_sites = found.size();
  module.recovery_why =
      plural(found.size(), "site", "sites") + " recovered without a record: " +
      (found.size() == 1 ? "its entry is" : "their entries are") + " the " + flag_text(flag) +
      " sled and the module was built with -fpatchable-function-entry" + flag_text(flag) + " (" +
      evidence + ")";
  module.sites.insert(module.sites.end(), std::make_move_iterator(found.begin()),
                      std::make_move_iterator(found.end()));
  std::stable_sort(module.sites.begin(), module.sites.end(),
                   [](const DiscoveredSite& a, const DiscoveredSite& b) { return a.entry < b.entry; });
}

}  // namespace ftjit

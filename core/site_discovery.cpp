// SPDX-License-Identifier: MIT
// discover_sites: pairs each patchable record with the function symbol that owns it.
#include "core/site_discovery.h"

#include <algorithm>
#include <utility>

#include "core/demangle.h"
#include "core/sled_layout.h"

namespace ftjit {
namespace {

// The ops slot is the 8 bytes just before the symbol, when the layout put
// at least that many NOPs there (x86-64 =13,8; arm64 =4,2).
constexpr uint64_t kSlotBytes = 8;

// One record with its code window (ElfImage::code_near_record).
class RecordView {
 public:
  RecordView(const ElfImage& img, size_t index)
      : record_(img.patchable_records()[index]), code_(img.code_near_record(index)) {}

  uint64_t record() const { return record_; }

  // The window's bytes from link-time address `vaddr` on; empty outside it.
  std::span<const uint8_t> code_at(uint64_t vaddr) const {
    const uint64_t start = record_ - ElfImage::kCodeBeforeRecord;  // may wrap: compared as offsets
    const uint64_t offset = vaddr - start;
    if (offset >= code_.size()) return {};
    return code_.subspan(offset);
  }

 private:
  uint64_t record_;
  std::span<const uint8_t> code_;
};

using FunctionIt = BulkVector<ElfSymbol>::const_iterator;

// The first function at or past each of a sorted run of addresses: records
// come sorted, so one forward walk over the functions serves them all
// (a binary search per record missed the cache some twenty times, most
// of what discovering a million sites cost).
class FunctionCursor {
 public:
  explicit FunctionCursor(const BulkVector<ElfSymbol>& functions)
      : it_(functions.begin()), end_(functions.end()) {}
  FunctionIt first_at_or_after(uint64_t vaddr) {
    while (it_ != end_ && it_->value < vaddr) ++it_;
    return it_;
  }

 private:
  FunctionIt it_, end_;
};

// A record's function: its symbol and where its site starts.
struct Owner {
  const ElfSymbol* symbol = nullptr;
  uint64_t start = 0;  // link-time site start: symbol + pad
  uint32_t pad = 0;
};

// =N,0 after a landing pad: the record points past the pad, at the symbol
// + pad (arm64 -mbranch-protection with -fpatchable-function-entry=2).
// `first_at_or_after`: the first function whose value is at or past the
// record (FunctionCursor).
Owner owner_before(const ElfImage& img, const RecordView& rec, FunctionIt first_at_or_after) {
  const uint64_t record = rec.record();
  const auto& functions = img.functions();
  // Pads are a few bytes: look at the symbols just below the record.
  auto it = first_at_or_after;
  while (it != functions.begin()) {
    --it;
    if (record - it->value > ElfImage::kCodeBeforeRecord) break;
    const uint32_t pad = landing_pad_bytes(img.isa(), rec.code_at(it->value));
    if (pad != 0 && it->value + pad == record) {
      // functions() puts the preferred name first among equal values.
      while (it != functions.begin() && (it - 1)->value == it->value) --it;
      return {&*it, record, pad};
    }
  }
  return {};
}

// =N,M: the symbol lies M NOPs after the record (0 for =N), and its site
// starts past the landing pad the compiler may have put there. The nearest
// symbol at or after the record owns it unless the next record belongs to
// that symbol (its site starts at or past the next record: with =N,0
// layouts records can be as close as 16 bytes, and a static function with
// no name in a stripped file leaves a record that must not take the next
// function's name).
Owner owner_at_or_after(const ElfImage& img, const RecordView& rec, FunctionIt first_at_or_after,
                        uint64_t next_record, bool has_next) {
  const uint64_t record = rec.record();
  const auto& functions = img.functions();
  const auto f = first_at_or_after;
  if (f == functions.end() || f->value - record > kMaxSitePrefixBytes) return {};
  const uint32_t pad = landing_pad_bytes(img.isa(), rec.code_at(f->value));
  const uint64_t start = f->value + pad;
  if (start - record > kMaxSitePrefixBytes) return {};
  if (has_next && next_record <= start) return {};
  return {&*f, start, pad};
}

}  // namespace

DiscoveredSite named_site(uint64_t record, const ElfSymbol& function, uint32_t pad,
                          DiscoveredModule& module) {
  const uint64_t load_bias = module.load_bias;
  DiscoveredSite site;
  // Unsigned wrap-around is the intended arithmetic for every address.
  const uint64_t symbol = function.value;
  const uint64_t start = symbol + pad;
  site.entry = start + load_bias;
  site.named = symbol + load_bias != 0;  // as unnamed sites read
  site.prefix_bytes = static_cast<uint32_t>(start - record);
  site.pad_bytes = static_cast<uint8_t>(pad);
  if (symbol - record >= kSlotBytes && symbol >= record) {
    site.slot = symbol - kSlotBytes + load_bias;
    site.slot_state = (symbol - kSlotBytes) % kSlotBytes == 0 ? OpsSlot::kAligned
                                                              : OpsSlot::kMisaligned;
  }
  site.name = function.name;
  // Known from the symbol table's pass: a C name is not read again here
  // (names lie in the string table's order, not in the records').
  if (function.mangled) {
    std::string demangled = demangle(function.name);
    if (demangled != site.name) site.demangled = module.names.keep(std::move(demangled));
  }
  return site;
}

Result<DiscoveredModule> discover_sites(const ElfImage& img, std::string path,
                                        uint64_t load_bias) {
  DiscoveredModule module;
  module.path = std::move(path);
  module.load_bias = load_bias;
  module.isa = img.isa();
  module.has_patchable_section = img.has_patchable_section();
  module.names.share_symbol_table(img.function_names());

  const auto& records = img.patchable_records();
  module.sites.reserve(records.size());
  FunctionCursor cursor(img.functions());
  for (size_t i = 0; i < records.size(); ++i) {
    const RecordView rec(img, i);
    const bool has_next = i + 1 < records.size();
    const FunctionIt at_or_after = cursor.first_at_or_after(rec.record());
    Owner owner = owner_before(img, rec, at_or_after);
    if (owner.symbol == nullptr) {
      owner = owner_at_or_after(img, rec, at_or_after, has_next ? records[i + 1] : 0, has_next);
    }

    if (owner.symbol == nullptr) {
      DiscoveredSite site;
      // No name: nothing tells where the symbol is; the site starts at the
      // record (prefix 0), wrapped as every address may.
      site.entry = rec.record() + load_bias;
      module.sites.push_back(std::move(site));
      continue;
    }
    module.sites.push_back(named_site(rec.record(), *owner.symbol, owner.pad, module));
  }
  // Records are sorted and each entry lies in [record, next record), so
  // this only matters if a load bias wraps addresses around.
  auto by_entry = [](const DiscoveredSite& a, const DiscoveredSite& b) { return a.entry < b.entry; };
  if (!std::is_sorted(module.sites.begin(), module.sites.end(), by_entry)) {
    std::stable_sort(module.sites.begin(), module.sites.end(), by_entry);
  }
  return module;
}

}  // namespace ftjit

#include "missile/colorer/channel_map.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "missile/common/status_macros.h"

namespace missile::colorer {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// The last byte of [begin, begin + bytes), cut at 2^64 - 1. bytes must be > 0.
uint64_t LastByte(uint64_t begin, uint64_t bytes) {
  return bytes - 1 > kU64Max - begin ? kU64Max : begin + (bytes - 1);
}

absl::Status CheckBlockBytes(uint64_t block_bytes) {
  if (!std::has_single_bit(block_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_bytes must be a power of two, got ", block_bytes));
  }
  return absl::OkStatus();
}

void AddUnique(std::vector<ChannelSet>& sets, ChannelSet s) {
  if (std::find(sets.begin(), sets.end(), s) == sets.end()) sets.push_back(s);
}

}  // namespace

std::string_view KindName(ChannelMapSpec::Kind kind) {
  switch (kind) {
    case ChannelMapSpec::Kind::kUniform:
      return "uniform";
    case ChannelMapSpec::Kind::kXor:
      return "xor";
    case ChannelMapSpec::Kind::kLookupTable:
      return "table";
  }
  return "unknown";
}

absl::StatusOr<ChannelMapSpec::Kind> ParseKind(std::string_view name) {
  for (auto kind : {ChannelMapSpec::Kind::kUniform, ChannelMapSpec::Kind::kXor,
                    ChannelMapSpec::Kind::kLookupTable}) {
    if (name == KindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown channel map kind '",
                                                 absl::string_view(name.data(), name.size()),
                                                 "' (expected uniform, xor or table)"));
}

// ---------------------------------------------------------------------------------------------
// ChannelMap

ChannelSet ChannelMap::ChannelsOf(uint64_t phys_begin, uint64_t bytes) const {
  ChannelSet seen;
  if (bytes == 0) return seen;
  const uint64_t last = LastByte(phys_begin, bytes);
  const uint64_t granule = granule_bytes();
  const ChannelSet all = AllChannels();
  for (uint64_t addr = phys_begin & ~(granule - 1);; addr += granule) {
    seen.Add(ChannelOf(addr));
    if (seen == all || last - addr < granule) break;
  }
  return seen;
}

// ---------------------------------------------------------------------------------------------
// XorChannelMap

absl::StatusOr<std::unique_ptr<XorChannelMap>> XorChannelMap::Create(std::vector<uint64_t> masks) {
  if (masks.empty()) return absl::InvalidArgumentError("xor channel map: no masks");
  if (masks.size() > static_cast<size_t>(kMaxMasks)) {
    return absl::InvalidArgumentError(absl::StrCat("xor channel map: ", masks.size(),
                                                   " masks, at most ", kMaxMasks,
                                                   " (64 channels) are supported"));
  }
  // Gaussian elimination over GF(2): each mask must add a new dimension.
  std::vector<uint64_t> basis;  // kept reduced: distinct leading bits
  for (size_t i = 0; i < masks.size(); ++i) {
    if (masks[i] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("xor channel map: masks[", i, "] is zero"));
    }
    uint64_t v = masks[i];
    for (uint64_t b : basis) v = std::min(v, v ^ b);
    if (v == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "xor channel map: masks[%d] = 0x%x is the XOR of earlier masks, so some channels "
          "would be unreachable",
          i, masks[i]));
    }
    basis.push_back(v);
    std::sort(basis.rbegin(), basis.rend());
  }
  return std::unique_ptr<XorChannelMap>(new XorChannelMap(std::move(masks)));
}

XorChannelMap::XorChannelMap(std::vector<uint64_t> masks) : masks_(std::move(masks)) {
  uint64_t any = 0;
  for (uint64_t m : masks_) any |= m;
  granule_bytes_ = uint64_t{1} << std::countr_zero(any);
  span_[0] = ChannelSet::Single(0);
  for (int bit = 0; bit < 64; ++bit) {
    int column = 0;  // the channel-index change caused by flipping address bit `bit`
    for (size_t i = 0; i < masks_.size(); ++i)
      column |= static_cast<int>((masks_[i] >> bit) & 1) << i;
    ChannelSet next = span_[bit];
    if (column != 0 && !span_[bit].Contains(column)) {
      for (int s : span_[bit].Indices()) next.Add(s ^ column);
    }
    span_[bit + 1] = next;
  }
}

int XorChannelMap::ChannelOf(uint64_t phys) const {
  int channel = 0;
  for (size_t i = 0; i < masks_.size(); ++i) {
    channel |= (std::popcount(phys & masks_[i]) & 1) << i;
  }
  return channel;
}

ChannelSet XorChannelMap::Coset(int base, int log2_block) const {
  const ChannelSet span = span_[log2_block];
  if (span.Count() == channel_count()) return span;
  ChannelSet out;
  for (int s : span.Indices()) out.Add(base ^ s);
  return out;
}

ChannelSet XorChannelMap::ChannelsOf(uint64_t phys_begin, uint64_t bytes) const {
  ChannelSet seen;
  if (bytes == 0) return seen;
  const uint64_t last = LastByte(phys_begin, bytes);
  const ChannelSet all = AllChannels();
  // Cover [cur, last] with the largest naturally aligned power-of-two blocks: at most ~128.
  for (uint64_t cur = phys_begin;;) {
    const int align = cur == 0 ? 64 : std::countr_zero(cur);
    const uint64_t remaining = last - cur;  // bytes left, minus one
    const int fit = remaining == kU64Max ? 64 : std::bit_width(remaining + 1) - 1;
    const int log2_block = std::min(align, fit);
    seen |= Coset(ChannelOf(cur), log2_block);
    if (seen == all || log2_block == 64) break;
    const uint64_t block_last = cur + ((uint64_t{1} << log2_block) - 1);
    if (block_last == last) break;
    cur = block_last + 1;
  }
  return seen;
}

absl::StatusOr<std::vector<ChannelSet>> XorChannelMap::AlignedBlockChannelSets(
    uint64_t block_bytes) const {
  MISSILE_RETURN_IF_ERROR(CheckBlockBytes(block_bytes));
  // Every channel index is reachable (the masks are independent), so the block channel sets
  // are exactly the cosets of span_[L].
  const int log2_block = std::countr_zero(block_bytes);
  std::vector<ChannelSet> sets;
  for (int base = 0; base < channel_count(); ++base) AddUnique(sets, Coset(base, log2_block));
  return sets;
}

ChannelMapSpec XorChannelMap::spec() const {
  ChannelMapSpec spec;
  spec.kind = ChannelMapSpec::Kind::kXor;
  spec.masks = masks_;
  return spec;
}

// ---------------------------------------------------------------------------------------------
// LookupTableChannelMap

absl::StatusOr<std::unique_ptr<LookupTableChannelMap>> LookupTableChannelMap::Create(
    int granule_shift, std::vector<int> table) {
  if (granule_shift < 0 || granule_shift > 63) {
    return absl::InvalidArgumentError(
        absl::StrCat("table channel map: granule_shift must be in [0, 63], got ", granule_shift));
  }
  if (table.empty()) return absl::InvalidArgumentError("table channel map: empty table");
  if (table.size() > kMaxTableSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("table channel map: ", table.size(), " entries, at most ", kMaxTableSize));
  }
  ChannelSet used;
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] < 0 || table[i] >= kMaxChannels) {
      return absl::InvalidArgumentError(
          absl::StrCat("table channel map: table[", i, "] = ", table[i], " is outside [0, 64)"));
    }
    used.Add(table[i]);
  }
  const int count = 64 - std::countl_zero(used.bits());
  if (used != ChannelSet::FirstN(count)) {
    const int missing = std::countr_zero(~used.bits());  // the lowest absent channel
    return absl::InvalidArgumentError(absl::StrCat("table channel map: channel ", missing,
                                                   " never appears but channel ", count - 1,
                                                   " does; channels must be numbered 0..count-1"));
  }
  return std::unique_ptr<LookupTableChannelMap>(
      new LookupTableChannelMap(granule_shift, std::move(table)));
}

LookupTableChannelMap::LookupTableChannelMap(int granule_shift, std::vector<int> table)
    : granule_shift_(granule_shift),
      table_(std::move(table)),
      channel_count_(*std::max_element(table_.begin(), table_.end()) + 1) {}

int LookupTableChannelMap::ChannelOf(uint64_t phys) const {
  return table_[(phys >> granule_shift_) % table_.size()];
}

ChannelSet LookupTableChannelMap::ChannelsOf(uint64_t phys_begin, uint64_t bytes) const {
  ChannelSet seen;
  if (bytes == 0) return seen;
  const uint64_t first = phys_begin >> granule_shift_;
  const uint64_t extra = (LastByte(phys_begin, bytes) >> granule_shift_) - first;  // granules - 1
  // Every channel appears in the table, so a full period touches them all.
  if (extra >= table_.size() - 1) return AllChannels();
  const ChannelSet all = AllChannels();
  size_t index = first % table_.size();
  for (uint64_t i = 0; i <= extra; ++i) {
    seen.Add(table_[index]);
    if (seen == all) break;
    if (++index == table_.size()) index = 0;
  }
  return seen;
}

absl::StatusOr<std::vector<ChannelSet>> LookupTableChannelMap::AlignedBlockChannelSets(
    uint64_t block_bytes) const {
  MISSILE_RETURN_IF_ERROR(CheckBlockBytes(block_bytes));
  const int log2_block = std::countr_zero(block_bytes);
  const size_t n = table_.size();
  std::vector<ChannelSet> sets;
  if (log2_block <= granule_shift_) {  // a block lies inside one entry
    for (int c = 0; c < channel_count_; ++c) sets.push_back(ChannelSet::Single(c));
    return sets;
  }
  const int entries_log2 = log2_block - granule_shift_;
  if (entries_log2 >= 40 || (uint64_t{1} << entries_log2) >= n) return std::vector{AllChannels()};
  const size_t m = size_t{1} << entries_log2;  // entries per block, < n
  // Blocks start at entry j*m (mod n) and cover m entries, possibly wrapping once. The OR over
  // each window comes from per-m-block prefix and suffix ORs over the doubled table (van Herk /
  // Gil-Werman), so the whole pass is O(n).
  std::vector<uint64_t> prefix(2 * n), suffix(2 * n);
  auto bit = [&](size_t i) { return uint64_t{1} << table_[i % n]; };
  for (size_t i = 0; i < 2 * n; ++i) prefix[i] = (i % m == 0) ? bit(i) : prefix[i - 1] | bit(i);
  for (size_t i = 2 * n; i-- > 0;) {
    suffix[i] = (i % m == m - 1 || i == 2 * n - 1) ? bit(i) : bit(i) | suffix[i + 1];
  }
  const size_t blocks = n / std::gcd(n, m);
  size_t start = 0;
  for (size_t j = 0; j < blocks; ++j) {
    AddUnique(sets, ChannelSet::FromBits(suffix[start] | prefix[start + m - 1]));
    start = (start + m) % n;
  }
  return sets;
}

ChannelMapSpec LookupTableChannelMap::spec() const {
  ChannelMapSpec spec;
  spec.kind = ChannelMapSpec::Kind::kLookupTable;
  spec.granule_shift = granule_shift_;
  spec.table = table_;
  return spec;
}

// ---------------------------------------------------------------------------------------------
// UniformChannelMap

absl::StatusOr<std::unique_ptr<UniformChannelMap>> UniformChannelMap::Create(int channels) {
  if (channels < 1 || channels > kMaxChannels) {
    return absl::InvalidArgumentError(
        absl::StrCat("uniform channel map: channels must be in [1, 64], got ", channels));
  }
  return std::unique_ptr<UniformChannelMap>(new UniformChannelMap(channels));
}

int UniformChannelMap::ChannelOf(uint64_t phys) const {
  return static_cast<int>((phys / kGranuleBytes) % static_cast<uint64_t>(channels_));
}

ChannelSet UniformChannelMap::ChannelsOf(uint64_t phys_begin, uint64_t bytes) const {
  ChannelSet seen;
  if (bytes == 0) return seen;
  const uint64_t first = phys_begin / kGranuleBytes;
  const uint64_t extra = LastByte(phys_begin, bytes) / kGranuleBytes - first;  // granules - 1
  if (extra >= static_cast<uint64_t>(channels_ - 1)) return AllChannels();
  int channel = ChannelOf(phys_begin);
  for (uint64_t i = 0; i <= extra; ++i) {
    seen.Add(channel);
    if (++channel == channels_) channel = 0;
  }
  return seen;
}

absl::StatusOr<std::vector<ChannelSet>> UniformChannelMap::AlignedBlockChannelSets(
    uint64_t block_bytes) const {
  MISSILE_RETURN_IF_ERROR(CheckBlockBytes(block_bytes));
  if (block_bytes / kGranuleBytes >= static_cast<uint64_t>(channels_)) {
    return std::vector{AllChannels()};
  }
  // Fewer granules per block than channels (so block_bytes < 16 KiB): the pattern repeats
  // after lcm(channels * 256, block_bytes) bytes, at most 64 blocks.
  const uint64_t period = std::lcm(static_cast<uint64_t>(channels_) * kGranuleBytes, block_bytes);
  std::vector<ChannelSet> sets;
  for (uint64_t begin = 0; begin < period; begin += block_bytes) {
    AddUnique(sets, ChannelsOf(begin, block_bytes));
  }
  return sets;
}

ChannelMapSpec UniformChannelMap::spec() const {
  ChannelMapSpec spec;
  spec.kind = ChannelMapSpec::Kind::kUniform;
  spec.channels = channels_;
  return spec;
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<ChannelMap>> MakeChannelMap(const ChannelMapSpec& spec) {
  const bool has_masks = !spec.masks.empty();
  const bool has_table = !spec.table.empty() || spec.granule_shift != 0;
  switch (spec.kind) {
    case ChannelMapSpec::Kind::kUniform:
      if (has_masks || has_table) {
        return absl::InvalidArgumentError("uniform channel map: masks/table given");
      }
      return UniformChannelMap::Create(spec.channels);
    case ChannelMapSpec::Kind::kXor:
      if (has_table) return absl::InvalidArgumentError("xor channel map: table given");
      return XorChannelMap::Create(spec.masks);
    case ChannelMapSpec::Kind::kLookupTable:
      if (has_masks) return absl::InvalidArgumentError("table channel map: masks given");
      return LookupTableChannelMap::Create(spec.granule_shift, spec.table);
  }
  return absl::InvalidArgumentError("unknown channel map kind");
}

}  // namespace missile::colorer

// Channel maps: which VRAM channel (memory controller / L2 slice group) serves a physical
// address, and which channels a physical range touches.
//
// Contract:
// - Addresses and sizes are in bytes of GPU physical address space (as the daemon's chunk pool
//   numbers it). A range [phys_begin, phys_begin + bytes) that would run past 2^64 is cut there.
// - ChannelOf(p) is in [0, channel_count()); ChannelsOf(p, 0) is empty.
// - The channel is constant inside each naturally aligned block of granule_bytes(); ChannelsOf
//   costs at most one step per granule and most maps do far better (an XOR map is O(64)).
// - Maps are immutable once built: all const methods may be called concurrently from any thread.
// - Built only through the validating factories (absl::StatusOr), never half-valid.
//
// Three forms:
// - XorChannelMap: channel bit i = parity(phys & masks[i]), the form published for reverse-
//   engineered Pascal/Volta GPUs (e.g. FGPU, RTAS 2019). 1..6 masks, so 2..64 channels.
// - LookupTableChannelMap: channel = table[(phys >> granule_shift) % table.size()], the form the
//   Missile research artifact used.
// - UniformChannelMap: n channels interleaved round-robin every 256 bytes, the model of a GPU
//   whose interleave is far finer than any chunk (the H200 as measured; docs/hardware/h200.md,
//   "VRAM channels").

#ifndef MISSILE_COLORER_CHANNEL_MAP_H_
#define MISSILE_COLORER_CHANNEL_MAP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "missile/colorer/channel_set.h"

namespace missile::colorer {

// The plain-value description of a map: what a profile stores and MakeChannelMap builds.
struct ChannelMapSpec {
  enum class Kind { kUniform, kXor, kLookupTable };
  Kind kind = Kind::kUniform;
  int channels = 1;             // kUniform: the channel count.
  std::vector<uint64_t> masks;  // kXor: one mask per channel-index bit, bit 0 first.
  int granule_shift = 0;        // kLookupTable: log2 of the bytes one table entry covers.
  std::vector<int> table;       // kLookupTable: channel per granule, repeating.

  friend bool operator==(const ChannelMapSpec&, const ChannelMapSpec&) = default;
};

// "uniform", "xor", "table".
std::string_view KindName(ChannelMapSpec::Kind kind);
absl::StatusOr<ChannelMapSpec::Kind> ParseKind(std::string_view name);

class ChannelMap {
 public:
  virtual ~ChannelMap() = default;

  virtual int channel_count() const = 0;
  virtual int ChannelOf(uint64_t phys) const = 0;
  // The set of channels the bytes [phys_begin, phys_begin + bytes) touch. The base version walks
  // one granule at a time and stops once every channel has been seen; maps override it.
  virtual ChannelSet ChannelsOf(uint64_t phys_begin, uint64_t bytes) const;
  // The interleave granule: a power of two; the channel is constant inside an aligned granule.
  virtual uint64_t granule_bytes() const = 0;
  // The distinct channel sets that naturally aligned blocks of block_bytes (a power of two)
  // touch, in no particular order. This is what decides how many colours chunks of that size
  // can have (see DistinguishableColours in colour_scheme.h).
  virtual absl::StatusOr<std::vector<ChannelSet>> AlignedBlockChannelSets(
      uint64_t block_bytes) const = 0;
  // The description this map was built from; MakeChannelMap(spec()) rebuilds an equal map.
  virtual ChannelMapSpec spec() const = 0;

  ChannelSet AllChannels() const { return ChannelSet::FirstN(channel_count()); }
};

class XorChannelMap final : public ChannelMap {
 public:
  static constexpr int kMaxMasks = 6;
  // Rejects: no masks, a zero mask, more than kMaxMasks masks, masks that are linearly dependent
  // over GF(2) (some channel indices would then be unreachable).
  static absl::StatusOr<std::unique_ptr<XorChannelMap>> Create(std::vector<uint64_t> masks);

  int channel_count() const override { return 1 << masks_.size(); }
  int ChannelOf(uint64_t phys) const override;
  // Exact and O(64): splits the range into aligned power-of-two blocks; the channels of a block
  // are a coset of the span of the masks' columns below the block size.
  ChannelSet ChannelsOf(uint64_t phys_begin, uint64_t bytes) const override;
  uint64_t granule_bytes() const override { return granule_bytes_; }
  absl::StatusOr<std::vector<ChannelSet>> AlignedBlockChannelSets(
      uint64_t block_bytes) const override;
  ChannelMapSpec spec() const override;

  const std::vector<uint64_t>& masks() const { return masks_; }

 private:
  explicit XorChannelMap(std::vector<uint64_t> masks);
  // {base ^ s : s in span_[log2_block]}: the channels of an aligned 2^log2_block block.
  ChannelSet Coset(int base, int log2_block) const;

  std::vector<uint64_t> masks_;
  uint64_t granule_bytes_;
  // span_[L]: the channel-index offsets reachable by varying address bits below L (L = 0..64),
  // as a set of channel indices.
  ChannelSet span_[65];
};

class LookupTableChannelMap final : public ChannelMap {
 public:
  static constexpr size_t kMaxTableSize = size_t{1} << 20;
  // Rejects: an empty table, more than kMaxTableSize entries, values outside [0, 64), a channel
  // below the maximum that never appears (channel_count() = max + 1 must be honest), and
  // granule_shift outside [0, 63].
  static absl::StatusOr<std::unique_ptr<LookupTableChannelMap>> Create(int granule_shift,
                                                                       std::vector<int> table);

  int channel_count() const override { return channel_count_; }
  int ChannelOf(uint64_t phys) const override;
  ChannelSet ChannelsOf(uint64_t phys_begin, uint64_t bytes) const override;
  uint64_t granule_bytes() const override { return uint64_t{1} << granule_shift_; }
  absl::StatusOr<std::vector<ChannelSet>> AlignedBlockChannelSets(
      uint64_t block_bytes) const override;
  ChannelMapSpec spec() const override;

 private:
  LookupTableChannelMap(int granule_shift, std::vector<int> table);

  int granule_shift_;
  std::vector<int> table_;
  int channel_count_;
};

class UniformChannelMap final : public ChannelMap {
 public:
  static constexpr uint64_t kGranuleBytes = 256;
  // Rejects channels outside [1, 64].
  static absl::StatusOr<std::unique_ptr<UniformChannelMap>> Create(int channels);

  int channel_count() const override { return channels_; }
  // Round-robin: (phys / 256) % channels.
  int ChannelOf(uint64_t phys) const override;
  // Any range covering channel_count() granules (n * 256 bytes, 16 KiB at most) touches every
  // channel, so every 2 MiB chunk does.
  ChannelSet ChannelsOf(uint64_t phys_begin, uint64_t bytes) const override;
  uint64_t granule_bytes() const override { return kGranuleBytes; }
  absl::StatusOr<std::vector<ChannelSet>> AlignedBlockChannelSets(
      uint64_t block_bytes) const override;
  ChannelMapSpec spec() const override;

 private:
  explicit UniformChannelMap(int channels) : channels_(channels) {}
  int channels_;
};

// Builds the map a spec describes, validating it (the factories' checks, plus fields that do not
// belong to the kind must be empty/default).
absl::StatusOr<std::unique_ptr<ChannelMap>> MakeChannelMap(const ChannelMapSpec& spec);

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_CHANNEL_MAP_H_

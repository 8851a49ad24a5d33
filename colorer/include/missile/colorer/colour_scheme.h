// ColourScheme: groups a channel map's channels into colours. A chunk's colours are the colours
// whose channels its physical range touches; a chunk is clean when it touches exactly one colour.
//
// Contract:
// - Colours are numbered 0..colour_count()-1; each colour is a non-empty set of channels and
//   the colours partition the map's channels.
// - Physical addresses and sizes are bytes; see channel_map.h for range rules.
// - Immutable once built and cheap to copy (the map is shared): const methods may be called
//   concurrently from any thread.

#ifndef MISSILE_COLORER_COLOUR_SCHEME_H_
#define MISSILE_COLORER_COLOUR_SCHEME_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/channel_set.h"

namespace missile::colorer {

class ColourScheme {
 public:
  // Splits the channels 0..n-1 into `colours` runs of n/colours consecutive channels (colour c
  // holds channels [c*n/k, (c+1)*n/k)). Rejects a null map, colours < 1 and colours that do not
  // divide the channel count.
  static absl::StatusOr<ColourScheme> EvenSplit(std::shared_ptr<const ChannelMap> map, int colours);
  // Explicit groups: each non-empty, pairwise disjoint, together exactly the map's channels.
  static absl::StatusOr<ColourScheme> FromGroups(std::shared_ptr<const ChannelMap> map,
                                                 std::vector<ChannelSet> groups);
  // The finest scheme whose colours chunks of granularity_bytes (a power of two, naturally
  // aligned) can separate: channels that some chunk touches together share a colour. Its colour
  // count is DistinguishableColours(map, granularity_bytes), and every such chunk is clean.
  static absl::StatusOr<ColourScheme> ForGranularity(std::shared_ptr<const ChannelMap> map,
                                                     uint64_t granularity_bytes);

  int colour_count() const { return static_cast<int>(colours_.size()); }
  ColourSet AllColours() const { return ColourSet::FirstN(colour_count()); }
  // The channels of colour c; empty when c is out of range.
  ChannelSet ChannelsOfColour(int colour) const;
  // The colour that holds `channel`, or -1 when the channel is out of range.
  int ColourOfChannel(int channel) const;
  ColourSet ColoursOfChannels(ChannelSet channels) const;
  // The colours the bytes [phys_begin, phys_begin + bytes) touch (empty for bytes == 0).
  ColourSet ColoursOf(uint64_t phys_begin, uint64_t bytes) const;
  bool IsClean(uint64_t phys_begin, uint64_t bytes) const {
    return ColoursOf(phys_begin, bytes).Count() == 1;
  }

  const ChannelMap& map() const { return *map_; }
  const std::shared_ptr<const ChannelMap>& shared_map() const { return map_; }

 private:
  ColourScheme(std::shared_ptr<const ChannelMap> map, std::vector<ChannelSet> colours);

  std::shared_ptr<const ChannelMap> map_;
  std::vector<ChannelSet> colours_;
  std::vector<int> colour_of_channel_;
};

// How many colours naturally aligned chunks of granularity_bytes can tell apart on this map:
// the number of groups of channels linked by some chunk touching them together. 1 means
// colouring at that granularity cannot isolate anything (every chunk of a uniform map, or of an
// XOR map whose masks all lie below the chunk size).
absl::StatusOr<int> DistinguishableColours(const ChannelMap& map, uint64_t granularity_bytes);

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_COLOUR_SCHEME_H_

#include "missile/colorer/colour_scheme.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "missile/common/status_macros.h"

namespace missile::colorer {
namespace {

// Groups the channels that appear together in some set (union-find over at most 64 channels).
// Returns the groups ordered by their lowest channel.
std::vector<ChannelSet> LinkedGroups(int channel_count, const std::vector<ChannelSet>& sets) {
  std::vector<int> parent(channel_count);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int c) {
    while (parent[c] != c) c = parent[c] = parent[parent[c]];
    return c;
  };
  for (ChannelSet s : sets) {
    const int first = s.Lowest();
    if (first < 0) continue;
    for (int c : s.Indices()) parent[find(c)] = find(first);
  }
  std::vector<ChannelSet> groups;
  std::vector<int> group_of_root(channel_count, -1);
  for (int c = 0; c < channel_count; ++c) {
    const int root = find(c);
    if (group_of_root[root] < 0) {
      group_of_root[root] = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[group_of_root[root]].Add(c);
  }
  return groups;
}

}  // namespace

ColourScheme::ColourScheme(std::shared_ptr<const ChannelMap> map, std::vector<ChannelSet> colours)
    : map_(std::move(map)), colours_(std::move(colours)) {
  colour_of_channel_.assign(map_->channel_count(), -1);
  for (int c = 0; c < colour_count(); ++c) {
    for (int channel : colours_[c].Indices()) colour_of_channel_[channel] = c;
  }
}

absl::StatusOr<ColourScheme> ColourScheme::EvenSplit(std::shared_ptr<const ChannelMap> map,
                                                     int colours) {
  if (map == nullptr) return absl::InvalidArgumentError("colour scheme: null channel map");
  const int n = map->channel_count();
  if (colours < 1 || n % colours != 0) {
    return absl::InvalidArgumentError(absl::StrCat("colour scheme: ", colours,
                                                   " colours do not evenly split ", n,
                                                   " channels (need colours >= 1 dividing it)"));
  }
  const int per_colour = n / colours;
  std::vector<ChannelSet> groups;
  for (int c = 0; c < colours; ++c) {
    groups.push_back(
        ChannelSet::FromBits(ChannelSet::FirstN(per_colour).bits() << (c * per_colour)));
  }
  return ColourScheme(std::move(map), std::move(groups));
}

absl::StatusOr<ColourScheme> ColourScheme::FromGroups(std::shared_ptr<const ChannelMap> map,
                                                      std::vector<ChannelSet> groups) {
  if (map == nullptr) return absl::InvalidArgumentError("colour scheme: null channel map");
  if (groups.empty()) return absl::InvalidArgumentError("colour scheme: no colours");
  ChannelSet covered;
  for (size_t c = 0; c < groups.size(); ++c) {
    if (groups[c].Empty()) {
      return absl::InvalidArgumentError(absl::StrCat("colour scheme: colour ", c, " is empty"));
    }
    if (groups[c].Intersects(covered)) {
      return absl::InvalidArgumentError(absl::StrCat("colour scheme: colour ", c, " ",
                                                     groups[c].ToString(),
                                                     " shares channels with an earlier colour"));
    }
    covered |= groups[c];
  }
  if (covered != map->AllChannels()) {
    return absl::InvalidArgumentError(absl::StrCat("colour scheme: colours cover channels ",
                                                   covered.ToString(), ", the map has channels 0..",
                                                   map->channel_count() - 1));
  }
  return ColourScheme(std::move(map), std::move(groups));
}

absl::StatusOr<ColourScheme> ColourScheme::ForGranularity(std::shared_ptr<const ChannelMap> map,
                                                          uint64_t granularity_bytes) {
  if (map == nullptr) return absl::InvalidArgumentError("colour scheme: null channel map");
  MISSILE_ASSIGN_OR_RETURN(std::vector<ChannelSet> sets,
                           map->AlignedBlockChannelSets(granularity_bytes));
  std::vector<ChannelSet> groups = LinkedGroups(map->channel_count(), sets);
  return ColourScheme(std::move(map), std::move(groups));
}

ChannelSet ColourScheme::ChannelsOfColour(int colour) const {
  if (colour < 0 || colour >= colour_count()) return ChannelSet();
  return colours_[colour];
}

int ColourScheme::ColourOfChannel(int channel) const {
  if (channel < 0 || channel >= static_cast<int>(colour_of_channel_.size())) return -1;
  return colour_of_channel_[channel];
}

ColourSet ColourScheme::ColoursOfChannels(ChannelSet channels) const {
  ColourSet out;
  for (int c = 0; c < colour_count(); ++c) {
    if (colours_[c].Intersects(channels)) out.Add(c);
  }
  return out;
}

ColourSet ColourScheme::ColoursOf(uint64_t phys_begin, uint64_t bytes) const {
  return ColoursOfChannels(map_->ChannelsOf(phys_begin, bytes));
}

absl::StatusOr<int> DistinguishableColours(const ChannelMap& map, uint64_t granularity_bytes) {
  MISSILE_ASSIGN_OR_RETURN(std::vector<ChannelSet> sets,
                           map.AlignedBlockChannelSets(granularity_bytes));
  return static_cast<int>(LinkedGroups(map.channel_count(), sets).size());
}

}  // namespace missile::colorer

#include "missile/colorer/colour_policy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace missile::colorer {

absl::Status CheckCapacityAddsUp(const ColourCapacity& capacity) {
  uint64_t sum = capacity.unclean_bytes;
  for (size_t c = 0; c < capacity.clean_bytes.size(); ++c) {
    if (capacity.clean_bytes[c] > std::numeric_limits<uint64_t>::max() - sum) {
      return absl::InternalError("colour capacity: per-colour bytes overflow 64 bits");
    }
    sum += capacity.clean_bytes[c];
  }
  if (sum != capacity.total_bytes) {
    return absl::InternalError(absl::StrCat("colour capacity: clean + unclean bytes = ", sum,
                                            " but total_bytes = ", capacity.total_bytes));
  }
  if (capacity.ls_eligible_bytes > capacity.total_bytes ||
      capacity.be_eligible_bytes > capacity.total_bytes) {
    return absl::InternalError(
        absl::StrCat("colour capacity: eligible bytes (ls ", capacity.ls_eligible_bytes, ", be ",
                     capacity.be_eligible_bytes, ") exceed total_bytes = ", capacity.total_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<ColourPolicy> ColourPolicy::Create(ColourScheme scheme,
                                                  const ColourPolicyOptions& options) {
  const int k = scheme.colour_count();
  if (options.ls_colours.has_value() && options.ls_fraction.has_value()) {
    return absl::InvalidArgumentError("colour policy: set ls_colours or ls_fraction, not both");
  }
  int ls = 1;
  if (options.ls_colours.has_value()) {
    ls = *options.ls_colours;
    if (ls < 1 || (k >= 2 && ls > k - 1)) {
      return absl::InvalidArgumentError(absl::StrCat("colour policy: ls_colours = ", ls,
                                                     " must leave BE at least one of ", k,
                                                     " colours and be at least 1"));
    }
  } else if (options.ls_fraction.has_value()) {
    const double f = *options.ls_fraction;
    if (!std::isfinite(f) || f <= 0.0 || f >= 1.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("colour policy: ls_fraction = ", f, " must be in (0, 1)"));
    }
    ls = static_cast<int>(std::lround(f * k));
  }
  ls = std::clamp(ls, 1, std::max(1, k - 1));
  return ColourPolicy(std::move(scheme), ls, options.be_may_use_unclean);
}

ColourPolicy::ColourPolicy(ColourScheme scheme, int ls_count, bool be_may_use_unclean)
    : scheme_(std::move(scheme)),
      isolating_(scheme_.colour_count() >= 2),
      be_may_use_unclean_(be_may_use_unclean) {
  if (isolating_) {
    ls_colours_ = ColourSet::FirstN(ls_count);
    be_colours_ = ColourSet::FromBits(scheme_.AllColours().bits() & ~ls_colours_.bits());
  } else {
    ls_colours_ = be_colours_ = scheme_.AllColours();
  }
}

ColourSet ColourPolicy::ColoursFor(TenantClass cls) const {
  return cls == TenantClass::kLatencySensitive ? ls_colours_ : be_colours_;
}

std::vector<int> ColourPolicy::PreferenceOrder(TenantClass cls) const {
  return ColoursFor(cls).Indices();
}

std::optional<int> ColourPolicy::Rank(ColourSet chunk_colours, TenantClass cls) const {
  if (chunk_colours.Empty()) return std::nullopt;
  const ColourSet allowed = ColoursFor(cls);
  const int clean_ranks = allowed.Count();
  if (chunk_colours.IsSubsetOf(allowed)) {
    if (chunk_colours.Count() > 1) return clean_ranks;  // unclean, but within the class
    // Position of the chunk's colour in PreferenceOrder (ascending colour index).
    const uint64_t below = allowed.bits() & ((uint64_t{1} << chunk_colours.Lowest()) - 1);
    return std::popcount(below);
  }
  if (cls == TenantClass::kBestEffort && be_may_use_unclean_ && chunk_colours.Intersects(allowed)) {
    return clean_ranks + 1;
  }
  return std::nullopt;
}

ColourCapacity ColourPolicy::Capacity(const std::vector<PhysRange>& chunks) const {
  ColourCapacity cap;
  cap.clean_bytes.assign(scheme_.colour_count(), 0);
  for (const PhysRange& chunk : chunks) {
    if (chunk.bytes == 0) continue;
    const ColourSet colours = scheme_.ColoursOf(chunk.begin, chunk.bytes);
    cap.total_bytes += chunk.bytes;
    if (colours.Count() == 1) {
      cap.clean_bytes[colours.Lowest()] += chunk.bytes;
    } else {
      cap.unclean_bytes += chunk.bytes;
    }
    if (Eligible(colours, TenantClass::kLatencySensitive)) cap.ls_eligible_bytes += chunk.bytes;
    if (Eligible(colours, TenantClass::kBestEffort)) cap.be_eligible_bytes += chunk.bytes;
  }
  return cap;
}

}  // namespace missile::colorer

// ColourPolicy: which chunks latency-sensitive (LS) and best-effort (BE) tenants may take.
//
// Contract:
// - With k >= 2 colours the policy is isolating: colours 0..ls-1 are exclusive to LS tenants,
//   colours ls..k-1 are shared by BE tenants. A chunk is eligible for a class when its colours
//   are a non-empty subset of that class's colours. A chunk that straddles LS and BE colours is
//   eligible for neither (unless be_may_use_unclean lets BE take it as a last resort).
// - With one colour the policy is not isolating (isolating() == false): both classes share
//   colour 0 and every non-empty chunk is eligible for both, whatever split was asked for.
// - Ranks order the eligible chunks for a class: lower first; clean chunks rank by the position
//   of their colour in PreferenceOrder(); unclean chunks rank after all clean ones.
// - Capacities are in bytes. Immutable once built: const methods are safe from any thread.

#ifndef MISSILE_COLORER_COLOUR_POLICY_H_
#define MISSILE_COLORER_COLOUR_POLICY_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "missile/colorer/channel_set.h"
#include "missile/common/tenant_class.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::colorer {

// The one TenantClass (missile/common/tenant_class.h), named here for the colour code.
using ::missile::TenantClass;
using ::missile::TenantClassName;

struct ColourPolicyOptions {
  // How many of the k colours LS tenants get exclusively. Set at most one of the two; with
  // neither, LS gets one colour. ls_colours must lie in [1, k-1]; ls_fraction in (0, 1) is
  // rounded to the nearest count and clamped to [1, k-1]. Ignored (but still range-checked)
  // when k == 1.
  std::optional<int> ls_colours;
  std::optional<double> ls_fraction;
  // Let BE tenants take chunks that straddle LS and BE colours, after every clean BE chunk.
  // Off by default: such a chunk puts BE traffic on LS channels.
  bool be_may_use_unclean = false;
};

// A physical chunk: [begin, begin + bytes).
struct PhysRange {
  uint64_t begin = 0;
  uint64_t bytes = 0;
};

// How the bytes of a list of chunks fall into colours.
struct ColourCapacity {
  std::vector<uint64_t> clean_bytes;  // per colour: chunks touching only that colour
  uint64_t unclean_bytes = 0;         // chunks touching two or more colours
  uint64_t total_bytes = 0;           // all chunks
  uint64_t ls_eligible_bytes = 0;     // chunks an LS tenant may take
  uint64_t be_eligible_bytes = 0;     // chunks a BE tenant may take
};

// OK when sum(clean_bytes) + unclean_bytes == total_bytes (without overflow) and each eligible
// total is at most total_bytes; otherwise INTERNAL naming the mismatch.
absl::Status CheckCapacityAddsUp(const ColourCapacity& capacity);

class ColourPolicy {
 public:
  // Rejects: both ls_colours and ls_fraction set, ls_colours outside [1, k-1] (k >= 2) or < 1,
  // ls_fraction outside (0, 1) or not finite.
  static absl::StatusOr<ColourPolicy> Create(ColourScheme scheme,
                                             const ColourPolicyOptions& options = {});

  bool isolating() const { return isolating_; }
  const ColourScheme& scheme() const { return scheme_; }
  // The colours a class may take: LS's exclusive colours, or the BE-shared ones.
  ColourSet ColoursFor(TenantClass cls) const;
  // The order in which a class should take colours (the daemon may rotate within it to balance).
  std::vector<int> PreferenceOrder(TenantClass cls) const;

  bool Eligible(ColourSet chunk_colours, TenantClass cls) const {
    return Rank(chunk_colours, cls).has_value();
  }
  // nullopt when not eligible; otherwise lower ranks should be taken first.
  std::optional<int> Rank(ColourSet chunk_colours, TenantClass cls) const;
  // Convenience: the chunk's colours from the scheme, then Rank.
  std::optional<int> RankChunk(const PhysRange& chunk, TenantClass cls) const {
    return Rank(scheme_.ColoursOf(chunk.begin, chunk.bytes), cls);
  }

  ColourCapacity Capacity(const std::vector<PhysRange>& chunks) const;

 private:
  ColourPolicy(ColourScheme scheme, int ls_count, bool be_may_use_unclean);

  ColourScheme scheme_;
  bool isolating_;
  bool be_may_use_unclean_;
  ColourSet ls_colours_;
  ColourSet be_colours_;
};

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_COLOUR_POLICY_H_

// missile-calibrate --channel-map: recovers the channel hash below the VMM granularity inside
// one chunk the tool owns, by timing reads of address subsets. Pure logic over a
// ChannelProbeDevice (channel_gpu.h on a GPU, a model with a known hash in tests).
//
// Why inside one chunk: a 2 MiB VMM chunk is one large physical page, so offsets 0..2^21-1 are
// physical address bits; across chunks the physical bases are unknown.
//
// Method, per source ("dram": every line discarded from L2 after it is read, so reads load the
// memory channels; "l2": no discards, the subset stays L2-resident and loads the L2 slices):
// 1. Scan: for every non-zero mask m over the granule-index bits (granule_shift..chunk_shift-1,
//    8191 masks for 256-byte granules in 2 MiB), all SMs read the half of the chunk whose
//    parity under m is 0 (odd repeats: 1). If m lies in the hash's row space the half lives on
//    half the channel groups and takes twice as long; otherwise it spans all of them. Each time
//    is compared with the running median of its neighbours in measurement order (most masks
//    are neutral), which also cancels clock drift; ratio = median / time, median over repeats.
// 2. Fit (colorer/hash_fit.h) on all masks (conflict: ratio below 0.75 x the median); 5-fold
// cross-validation predicts every mask with a
//    fit that did not see it (the verification accuracy) and says how stable the function is.
// 3. Contention per predicted colour pair, on the source whose function the map file carries
//    (DRAM when its fit found structure with confidence >= 0.8, else the most confident): colours
//    from up to 3 fitted rows; a victim on a quarter of the blocks reads colour a while an
//    aggressor on the rest reads colour b (disjoint granules: a split bit puts them on
//    different halves); slowdown = 1 - alone / under (times). Same colour is predicted to
//    conflict; the slowdowns are split in two classes (largest gap) and compared.
//
// Contract: device errors pass through unchanged (the caller stops), except FAILED_PRECONDITION
// from the contention matrix (victim and aggressor did not overlap), which leaves the matrix
// out (pair_accuracy -1) and keeps the fit. The scans are bounded by 80 % of
// plan.time_budget_s, shared equally by the sources: a source stops after the sweep that passes
// its share (at least one sweep runs). Not thread-safe: one thread drives a device.

#ifndef MISSILE_COLORER_CALIBRATE_CHANNEL_SCAN_H_
#define MISSILE_COLORER_CALIBRATE_CHANNEL_SCAN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "channel_kernel_params.h"
#include "missile/colorer/hash_fit.h"

namespace missile::calibrate {

// A subset of one chunk's granules: parity(g & masks[j]) == parities bit j for each j.
// masks must be a reduced basis (colorer::Gf2Basis rows) over granule-index bits, at most
// kMaxSubsetConstraints of them; empty = the whole chunk.
struct Subset {
  std::vector<uint32_t> masks;
  uint32_t parities = 0;
};

struct SubsetLaunch {
  int list = 0;  // 0 or 1: which loaded chunk list
  Subset subset;
  int blocks = 1;
  uint64_t rounds = 1;  // passes over the subset
  bool discard = false;
  int granule_shift = 8;  // log2 bytes per granule (7..12)
};

class ChannelProbeDevice {
 public:
  static constexpr int kLists = 2;
  virtual ~ChannelProbeDevice() = default;
  virtual int sm_count() const = 0;
  virtual int blocks_per_sm() const = 0;
  virtual uint64_t chunk_bytes() const = 0;
  // Loads the chunks (device addresses of whole chunks; a power-of-two count) into a list slot.
  virtual absl::Status SetChunks(int list, const std::vector<uint64_t>& chunk_addresses) = 0;
  // One launch alone; its GPU time in ms.
  virtual absl::StatusOr<double> TimeSubset(const SubsetLaunch& reader) = 0;
  // The victim's GPU time in ms while the aggressor streams concurrently (FAILED_PRECONDITION
  // when they did not overlap).
  virtual absl::StatusOr<double> TimeSubsetUnder(const SubsetLaunch& victim,
                                                 const SubsetLaunch& aggressor) = 0;
};

inline uint64_t SubsetBytes(uint64_t chunk_bytes, uint64_t chunks, const Subset& s) {
  return chunk_bytes * chunks >> s.masks.size();
}

struct ChannelPlan {
  int granule_shift = 8;   // 256 B: the H200's L2-hit latency is constant inside 256 B
  int repeats = 5;         // sweeps over all masks per source (alternating parity)
  double target_ms = 0.5;  // GPU time of one scan launch
  std::vector<std::string> sources = {"dram", "l2"};
  int folds = 5;  // cross-validation: each fold's masks are held back from its fit
  uint64_t seed = 1;
  int pair_rows = 3;     // colours of the contention matrix: 2^min(rank, pair_rows)
  int pair_repeats = 3;  // alone/under pairs per colour pair (median)
  double pair_target_ms = 2;
  double time_budget_s = 150;
  int neighbour_window = 64;  // each side, for the running median
};

ChannelPlan MakeChannelPlan(bool quick, uint64_t seed);

struct SourceResult {
  std::string name;
  bool discard = false;
  double full_chunk_gbps = 0;  // all SMs reading the whole chunk
  double half_gbps = 0;        // median of the scan's half-chunk reads
  int sweeps = 0;
  std::vector<colorer::MaskObservation> observations;  // every mask, in address-bit positions
  double threshold = 0;
  colorer::XorHashFit fit;  // on all observations
  // Cross-validation: every mask predicted by a fit that did not see it.
  double cv_accuracy = 0;
  int cv_predictions = 0;
  int folds = 0;
  int folds_matching = 0;  // fold fits equal to `fit`
  // A second look, for the report only, at a threshold just outside the noise (median - 8 x
  // the ratios' robust spread) when that lies above the fit's: a partial loss that the halving
  // rule misses shows here. rank -1: not computed (the noise is too large).
  double sensitive_threshold = 0;
  colorer::XorHashFit sensitive_fit;
  double sensitive_cv_accuracy = 0;
  int sensitive_rank = -1;
};

struct PairMeasurement {
  int victim_colour = 0;
  int aggressor_colour = 0;
  bool predicted_conflict = false;
  double alone_gbps = 0;
  double under_gbps = 0;
  double slowdown = 0;
  bool measured_conflict = false;
};

// The L2 slice signature: L2-hit latency of one line per granule of the chunk, from one thread
// (one SM), split at the median into near and far, and the parity function that best explains
// the split (colorer::FitParityLabels; a near/far partition chosen by an XOR of address bits
// shows as a high agreement).
struct LatencySignature {
  bool measured = false;
  std::vector<double> cycles;  // per granule, cycles per load
  double min = 0, median = 0, max = 0;
  uint64_t mask = 0;  // in address-bit positions
  double agreement = 0;
  double runner_up = 0;
};

// Fills a signature from per-granule cycles per load (a power-of-two count >= 2).
absl::StatusOr<LatencySignature> LatencySignatureOf(std::vector<double> cycles, int granule_shift);

struct ChannelScanResult {
  std::vector<SourceResult> sources;
  int primary = 0;  // the source whose function the map file carries
  int pair_rows = 0;
  std::vector<PairMeasurement> pairs;
  double pair_threshold = 0;
  double pair_accuracy = -1;  // -1: fewer than two colours, nothing to predict
  LatencySignature latency;   // filled by the caller (it needs the chunk's pointer chase)
  double seconds = 0;
};

using ChannelProgress = std::function<void(const std::string&)>;

absl::StatusOr<ChannelScanResult> RunChannelScan(ChannelProbeDevice& device, uint64_t chunk_address,
                                                 const ChannelPlan& plan,
                                                 const ChannelProgress& progress);

// Fills the kernel's constraint fields (masks, pivots, parities, num_constraints,
// log2_granules) for `subset` over 2^log2_granules granules; INVALID_ARGUMENT unless the masks
// are a reduced basis (pivot = highest bit, ascending, no mask has another's pivot) inside the
// chunk, at most kMaxSubsetConstraints of them. The kernel then enumerates exactly the subset
// (SubsetGranule in channel_kernel_params.h).
absl::Status FillSubsetConstraints(const Subset& subset, int log2_granules, SubsetParams& params);

// The subset for colour `colour` (bit i = parity under rows[i]) with an extra split bit: the
// granules whose `split_bit` is `half`. Rows and the returned masks are over granule-index bits.
absl::StatusOr<Subset> ColourSubset(const std::vector<uint32_t>& rows, uint32_t colour,
                                    int split_bit, int half);
// A granule-index bit whose unit vector is outside the span of `rows` (below `bits`), or -1.
int SplitBit(const std::vector<uint32_t>& rows, int bits);
// The threshold between two classes of values: the middle of the largest gap between sorted
// neighbours (the values must have at least two distinct entries; else returns +inf).
double LargestGapThreshold(std::vector<double> values);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_CHANNEL_SCAN_H_

// Recovering a GPU's XOR (GF(2)-linear) channel hash from measurements, checking it on
// observations it was not fitted on, and saying what it means for colouring at a granularity.
//
// The model: channel(phys) = L * phys over GF(2), L a k x n bit matrix over the address bits
// [low_bit, high_bit) (rows = the channel-index bits, each a mask of address bits, as in
// XorChannelMap). Only L's row space R is observable: any basis of R gives the same partition of
// addresses into 2^k channel groups. Fits therefore return R as a canonical basis (reduced row
// echelon form, pivots = each row's highest bit), so two fits of the same GPU compare equal.
//
// Two kinds of evidence, both noisy:
// - Parity-subset scans (what missile-calibrate measures inside one 2 MiB chunk): the bandwidth
//   of reading only the addresses whose parity under mask m is 0, relative to the typical
//   subset of the same size. m in R: the subset lives on half the channel groups and its
//   bandwidth halves (ratio ~0.5); m not in R: it spans every group (ratio ~1).
//   FitRowSpaceFromScan classifies each mask and finds the subspace that agrees with most of
//   them, strongest conflicts first.
// - Pair conflicts (a conflict oracle: do addresses a and b share a channel?), the evidence of
//   published reverse engineering and of simulated GPUs in tests: FitWithConflictOracle learns
//   L column by column with majority votes; it handles masks over up to 64 address bits.
//
// Contract: pure functions over values, no CUDA, no I/O; safe from any thread (an oracle passed
// in is called from the calling thread only). Bad input (an empty or inverted bit range, masks
// outside it, fewer observations than the method needs) is INVALID_ARGUMENT and computes nothing.

#ifndef MISSILE_COLORER_HASH_FIT_H_
#define MISSILE_COLORER_HASH_FIT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace missile::colorer {

// A basis of a subspace of GF(2)^64, kept in reduced row echelon form: each row has a distinct
// pivot (its highest set bit) and no other row has that bit. A value type.
class Gf2Basis {
 public:
  Gf2Basis() = default;
  explicit Gf2Basis(const std::vector<uint64_t>& vectors);

  // Adds v to the spanning set; true when the rank grew.
  bool Add(uint64_t v);
  bool Contains(uint64_t v) const { return Reduce(v) == 0; }
  // v with every pivot bit cleared by adding rows: 0 exactly when v is in the span.
  uint64_t Reduce(uint64_t v) const;
  int rank() const { return static_cast<int>(rows_.size()); }
  // The rows in increasing pivot order.
  const std::vector<uint64_t>& rows() const { return rows_; }
  // Same span (the reduced forms are unique, so this is equality of rows).
  friend bool operator==(const Gf2Basis& a, const Gf2Basis& b) { return a.rows_ == b.rows_; }

 private:
  std::vector<uint64_t> rows_;  // sorted by pivot, fully reduced
};

inline int Parity(uint64_t v) { return __builtin_parityll(v); }

// The measured row space of a channel hash.
struct XorHashFit {
  int low_bit = 0;  // address bits [low_bit, high_bit) were observable
  int high_bit = 0;
  std::vector<uint64_t> masks;  // reduced basis of the row space, in address-bit positions
  int observations = 0;         // observations the fit used
  int disagreements = 0;        // of those, how many the fit contradicts
  // 1 - disagreements / observations: how much of the evidence the function explains.
  double agreement = 0;
  // How clear the conflicts were: for scans, the loss of the masks in the row space as a
  // fraction of a full halving ((neutral - their median ratio) / (neutral / 2), clipped to
  // [0, 1]); for oracle fits, the weakest vote margin. 0 when the fit found no structure.
  double separation = 0;
  // A single figure for the file: agreement scaled by separation (1 = clean, 0 = nothing).
  double confidence = 0;

  int rank() const { return static_cast<int>(masks.size()); }
  // Channel groups the observable bits distinguish: 2^rank.
  uint64_t groups() const { return uint64_t{1} << masks.size(); }
  // The group of an address: bit i = parity(addr & masks[i]) (bits outside the range ignored).
  uint64_t GroupOf(uint64_t addr) const;
};

// One parity-subset measurement: the subset {x : parity(x & mask) == 0} of the observable
// addresses, its bandwidth relative to the typical subset of the same size (1 = no loss).
struct MaskObservation {
  uint64_t mask = 0;  // in address-bit positions, non-zero, inside [low_bit, high_bit)
  double ratio = 1;
};

struct ScanFitOptions {
  int low_bit = 8;
  int high_bit = 21;
  // A mask counts as a conflict when its ratio is below this; <= 0: 0.75 x the median ratio,
  // halfway between no loss (the typical subset) and a halving.
  double threshold = 0;
};

// The row space that agrees with most classified observations (greedy over the conflicts,
// strongest first: a candidate is kept when the observations it newly brings into the span are
// more conflicts than not). Needs at least 8 observations.
absl::StatusOr<XorHashFit> FitRowSpaceFromScan(const std::vector<MaskObservation>& observations,
                                               const ScanFitOptions& options);
// The threshold FitRowSpaceFromScan uses for these observations and options.
double ScanThreshold(const std::vector<MaskObservation>& observations,
                     const ScanFitOptions& options);

// k-fold cross-validation: each fold's masks are predicted (in the row space <=> ratio below
// the threshold) by a fit that did not see them. `fit` is the fit on all observations;
// folds_matching counts the fold fits equal to it (how stable the function is).
struct ScanCrossValidation {
  XorHashFit fit;
  double accuracy = 0;
  int predictions = 0;
  int folds = 0;
  int folds_matching = 0;
};
absl::StatusOr<ScanCrossValidation> CrossValidateScan(
    const std::vector<MaskObservation>& observations, const ScanFitOptions& options, int folds,
    uint64_t seed);

// Fraction of held-back scan observations the fit predicts right: mask in the row space <=>
// ratio below `threshold`. INVALID_ARGUMENT when there are none.
absl::StatusOr<double> ScanAccuracy(const XorHashFit& fit,
                                    const std::vector<MaskObservation>& held_out, double threshold);

// Does the GPU serve addresses a and b from the same channel? (A measurement: may be wrong.)
using ConflictOracle = std::function<bool(uint64_t a, uint64_t b)>;

struct OracleFitOptions {
  int low_bit = 6;
  int high_bit = 40;
  int votes = 5;      // odd; each question is asked this often (different base addresses)
  int max_rank = 8;   // give up beyond 2^max_rank channels (the search per bit is 2^rank)
  uint64_t seed = 1;  // base addresses of the questions
};

// Learns L column by column: bit j either repeats a combination of earlier independent columns
// (found by asking whether x and x ^ e_j ^ e_S conflict, for each subset S of them) or is a new
// independent column. FAILED_PRECONDITION when the rank passes max_rank or the votes cannot
// decide (not an XOR function, or too noisy).
absl::StatusOr<XorHashFit> FitWithConflictOracle(const ConflictOracle& oracle,
                                                 const OracleFitOptions& options);

struct PairObservation {
  uint64_t a = 0, b = 0;
  bool conflict = false;  // measured
};
// Fraction of pairs whose measured conflict the fit predicts (same group <=> conflict).
absl::StatusOr<double> PairAccuracy(const XorHashFit& fit,
                                    const std::vector<PairObservation>& pairs);

// The parity function that best explains a binary label of every index 0..2^n-1 (for instance
// near/far L2 latency per 256-byte granule): label(g) ~ parity(g & mask) ^ constant. Exact, by
// a fast Walsh-Hadamard transform, O(n 2^n). `labels` must hold 2^n values (n in 1..24) of 0 or
// 1. agreement = fraction of indices the function explains (0.5: no parity structure; the zero
// mask, a constant, is a candidate too).
struct ParityFit {
  uint64_t mask = 0;  // over index bits
  int constant = 0;
  double agreement = 0;
  double runner_up = 0;  // the best agreement of any other mask
};
absl::StatusOr<ParityFit> FitParityLabels(const std::vector<int>& labels);

// What a fitted function means for chunks of `granularity_bytes` (a power of two): the colours
// such chunks can tell apart by the observed bits, and why.
struct GranularityColours {
  uint64_t granularity_bytes = 0;
  // 2^(dimension of the row-space vectors that use only address bits >= log2(granularity)):
  // every other channel-group function changes inside a chunk, so a chunk spans its groups.
  int colours = 1;
  // Address bits below log2(granularity) that some row-space vector uses: the bits that merge
  // colours. Empty when nothing below the granularity matters.
  std::vector<int> merging_bits;
  // Whether bits above the observed range could add colours the fit cannot see
  // (granularity above 2^high_bit).
  bool above_observed_range = false;
  std::string reason;  // one sentence for status output and reports
};
absl::StatusOr<GranularityColours> ColoursAtGranularity(const XorHashFit& fit,
                                                        uint64_t granularity_bytes);

// "8, 9, 11-14": a sorted bit list for messages.
std::string FormatBitList(const std::vector<int>& bits);

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_HASH_FIT_H_

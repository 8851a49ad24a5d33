// Learning colours without physical addresses: group chunks by whether streaming over them
// interferes, using an InterferenceOracle (on a GPU: two concurrent readers; in tests: a model).
//
// Contract:
// - Chunks are named by ChunkIndex 0..num_chunks-1; what an index means is the oracle's business.
// - Slowdown(a, b) is the relative bandwidth loss of a reader over chunk set a while another
//   reader streams chunk set b: 0 = no interference, about 0.5 = the two share the same channels
//   (H200: 639 GB/s alone, 322 GB/s shared, docs/hardware/h200.md, "VRAM channels"). It
//   returns an error when the measurement failed; the classifier stops and passes that error on.
// - Algorithm: each chunk in index order is compared with the classes found so far (largest
//   first) by Slowdown({chunk}, {up to probe_group_size members of the class}); at or above
//   `threshold` it joins that class, otherwise a new class starts. A decision whose value lies
//   within `ambiguity` of the threshold is measured again, up to max_repeats more times, and the
//   median decides. A confirmation pass then measures every pair of classes group-vs-group
//   (merging pairs that interfere) and every class's two halves against each other.
// - Call bound: at most ClassifierCallBound(num_chunks, k) oracle calls, where k is the number of
//   classes found before merging: (1 + max_repeats) * (N*k + k*(k+1)/2), i.e. O(N*k).
// - Not thread-safe: one ClassifyChunks call drives its oracle from the calling thread only.

#ifndef MISSILE_COLORER_CLASSIFIER_H_
#define MISSILE_COLORER_CLASSIFIER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace missile::colorer {

using ChunkIndex = uint32_t;

class InterferenceOracle {
 public:
  virtual ~InterferenceOracle() = default;
  // See the contract above. a and b are non-empty and disjoint.
  virtual absl::StatusOr<double> Slowdown(const std::vector<ChunkIndex>& a,
                                          const std::vector<ChunkIndex>& b) = 0;
};

struct ClassifierOptions {
  // Same colour when the slowdown is at or above this (midway between 0 and the ~0.5 of full
  // sharing).
  double threshold = 0.25;
  // A value within this distance of the threshold is re-measured.
  double ambiguity = 0.10;
  // Extra measurements for an ambiguous decision; the median of all samples decides.
  int max_repeats = 4;
  // Members of a class that stream against the chunk under test.
  int probe_group_size = 4;
  // Run the group-vs-group confirmation pass.
  bool confirm = true;
  // More classes than this is an error (a noisy oracle or a wrong threshold). At most 64.
  int max_classes = 64;
  // Stop with RESOURCE_EXHAUSTED after this many oracle calls; 0 = only the bound above.
  int64_t max_oracle_calls = 0;
};

// What the classification rests on. Class ids in intra_class/cross_class are those found by the
// assignment pass, before any confirmation merge.
struct ClassifierEvidence {
  int measurements = 0;             // decisions taken (each may use several oracle calls)
  int repeated_measurements = 0;    // decisions that needed extra samples
  int ambiguous_measurements = 0;   // decisions still within `ambiguity` after all repeats
  double min_same = 0;              // lowest slowdown judged "same colour" (NaN if none)
  double max_different = 0;         // highest slowdown judged "different colour" (NaN if none)
  std::vector<double> intra_class;  // per class: half vs half slowdown (NaN: < 2 chunks)
  std::vector<std::vector<double>> cross_class;  // [p][q]: group p vs group q (NaN on p >= q)
  int merged_classes = 0;  // classes merged into another by the confirmation pass
  int split_suspects = 0;  // classes whose halves did not interfere
  // Fraction of decisions that were clear (outside the ambiguity band) and, in the confirmation
  // pass, agreed with the assignment. 0 when nothing was measured (one chunk).
  double confidence = 0;
};

struct ClassificationResult {
  std::vector<std::vector<ChunkIndex>> classes;  // each sorted ascending; ordered by first chunk
  std::vector<int> class_of;                     // per chunk: its index in `classes`
  int64_t oracle_calls = 0;
  int64_t call_bound = 0;  // ClassifierCallBound for the classes found
  ClassifierEvidence evidence;
};

// (1 + max_repeats) * (num_chunks * classes + classes * (classes + 1) / 2); the last term only
// with options.confirm.
int64_t ClassifierCallBound(int64_t num_chunks, int64_t classes,
                            const ClassifierOptions& options = {});

// Rejects num_chunks < 1 and bad options (threshold not in (0, 1), ambiguity < 0,
// max_repeats < 0, probe_group_size < 1, max_classes outside [1, 64]).
absl::StatusOr<ClassificationResult> ClassifyChunks(int num_chunks, InterferenceOracle& oracle,
                                                    const ClassifierOptions& options = {});

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_CLASSIFIER_H_

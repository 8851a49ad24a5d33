// The verdict: how many colours 2 MiB chunks can be told apart by on this GPU, decided from the
// interference measurements. Pure logic, no CUDA.
//
// Contract:
// - The colour count is the classifier's class count, but only when the evidence separates the
//   classes clearly: every "different class" slowdown lies well below every "same class"
//   slowdown (max different <= max_ratio * min same, and min same - max different >= min_gap),
//   the classifier was confident, the confirmation pass merged nothing and split nothing, and
//   the oracle loaded DRAM rather than the L2. Otherwise the verdict is 1 colour: claiming
//   colours that do not isolate would be worse than claiming none.
// - The reason is one human-readable sentence, saved with the evidence.
// - Free functions over values: safe from any thread.

#ifndef MISSILE_COLORER_CALIBRATE_VERDICT_H_
#define MISSILE_COLORER_CALIBRATE_VERDICT_H_

#include <string>
#include <vector>

#include "missile/colorer/classifier.h"

namespace missile::calibrate {

// The table of measured slowdowns the verdict rests on.
struct VerdictInput {
  bool classified = false;  // the classifier ran to the end
  std::string failure;      // why not, when !classified
  int classes = 0;
  int merged_classes = 0;
  int split_suspects = 0;
  double confidence = 0;
  std::vector<double> same_class;       // slowdowns between chunks judged the same colour
  std::vector<double> different_class;  // slowdowns between distinct classes
  // False when a single discarded chunk read faster than DRAM can deliver (the L2 served it):
  // the classifier then measured the cache, not the channels.
  bool oracle_reaches_dram = true;
};

struct VerdictRule {
  // Different-class slowdowns must stay at or below this fraction of the same-class minimum.
  double max_ratio = 0.5;
  // ... and this far below it, in absolute slowdown (0.5 = full sharing on the H200,
  // docs/hardware/h200.md, "VRAM channels": 639 GB/s alone, 322 GB/s shared).
  double min_gap = 0.10;
  double min_confidence = 0.8;
};

struct Verdict {
  int colours = 1;
  std::string reason;
  double min_same = 0;       // NaN when there was none
  double max_different = 0;  // NaN when there was none
};

Verdict DecideColours(const VerdictInput& input, const VerdictRule& rule = {});

// The table from a finished classification: same_class = the lowest "same" decision and every
// class's half-vs-half value; different_class = every group-vs-group value (NaNs dropped).
VerdictInput VerdictInputFrom(const colorer::ClassificationResult& result);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_VERDICT_H_

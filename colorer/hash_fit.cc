#include "missile/colorer/hash_fit.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "missile/common/status_macros.h"

namespace missile::colorer {
namespace {

uint64_t RangeMask(int low_bit, int high_bit) {
  const uint64_t high = high_bit >= 64 ? ~uint64_t{0} : (uint64_t{1} << high_bit) - 1;
  const uint64_t low = (uint64_t{1} << low_bit) - 1;
  return high & ~low;
}

absl::Status CheckRange(int low_bit, int high_bit) {
  if (low_bit < 0 || low_bit > 63 || high_bit <= low_bit || high_bit > 64) {
    return absl::InvalidArgumentError(absl::StrCat("address bit range [", low_bit, ", ", high_bit,
                                                   ") is empty or outside [0, 64)"));
  }
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

std::vector<int> BitsOf(uint64_t v) {
  std::vector<int> bits;
  for (; v != 0; v &= v - 1) bits.push_back(std::countr_zero(v));
  return bits;
}

// Fills the fit's agreement figures from how many observations it contradicts.
void Score(XorHashFit& fit, int observations, int disagreements, double separation) {
  fit.observations = observations;
  fit.disagreements = disagreements;
  fit.agreement = observations > 0 ? 1.0 - static_cast<double>(disagreements) / observations : 0.0;
  fit.separation = std::clamp(separation, 0.0, 1.0);
  fit.confidence = fit.agreement * (fit.masks.empty() ? 1.0 : fit.separation);
}

}  // namespace

Gf2Basis::Gf2Basis(const std::vector<uint64_t>& vectors) {
  for (uint64_t v : vectors) Add(v);
}

uint64_t Gf2Basis::Reduce(uint64_t v) const {
  // Rows are sorted by pivot; clearing from the highest pivot down never sets a cleared pivot
  // again (a row has no bit at any other row's pivot).
  for (auto it = rows_.rbegin(); it != rows_.rend(); ++it) {
    const uint64_t pivot = uint64_t{1} << (63 - std::countl_zero(*it));
    if (v & pivot) v ^= *it;
  }
  return v;
}

bool Gf2Basis::Add(uint64_t v) {
  v = Reduce(v);
  if (v == 0) return false;
  const uint64_t pivot = uint64_t{1} << (63 - std::countl_zero(v));
  for (uint64_t& row : rows_) {
    if (row & pivot) row ^= v;
  }
  rows_.push_back(v);
  std::sort(rows_.begin(), rows_.end(),
            [](uint64_t a, uint64_t b) { return std::countl_zero(a) > std::countl_zero(b); });
  return true;
}

uint64_t XorHashFit::GroupOf(uint64_t addr) const {
  uint64_t group = 0;
  for (size_t i = 0; i < masks.size(); ++i) {
    group |= static_cast<uint64_t>(Parity(addr & masks[i])) << i;
  }
  return group;
}

double ScanThreshold(const std::vector<MaskObservation>& observations,
                     const ScanFitOptions& options) {
  if (options.threshold > 0) return options.threshold;
  std::vector<double> ratios;
  for (const MaskObservation& o : observations) ratios.push_back(o.ratio);
  // Halfway between no loss (the typical subset) and a halving (a subset on half the groups).
  return 0.75 * Median(ratios);
}

namespace {

// Grows a basis from the conflicting masks in `order` (after `seed`, when non-zero): a candidate
// joins when the observations it newly brings into the span (those whose reduction by the basis
// equals the candidate's) hold more conflicts than not. The per-reduction tallies are rebuilt
// after each growth, so each candidate costs O(1).
Gf2Basis GrowBasis(const std::vector<MaskObservation>& observations,
                   const std::vector<bool>& conflict, const std::vector<uint64_t>& order,
                   uint64_t seed) {
  Gf2Basis basis;
  if (seed != 0) basis.Add(seed);
  absl::flat_hash_map<uint64_t, int> tally;
  auto rebuild = [&] {
    tally.clear();
    for (size_t i = 0; i < observations.size(); ++i) {
      const uint64_t r = basis.Reduce(observations[i].mask);
      if (r != 0) tally[r] += conflict[i] ? 1 : -1;
    }
  };
  rebuild();
  for (uint64_t candidate : order) {
    const uint64_t r = basis.Reduce(candidate);
    if (r == 0) continue;
    const auto it = tally.find(r);
    if (it != tally.end() && it->second > 0) {
      basis.Add(candidate);
      rebuild();
    }
  }
  return basis;
}

int Disagreements(const Gf2Basis& basis, const std::vector<MaskObservation>& observations,
                  const std::vector<bool>& conflict) {
  int n = 0;
  for (size_t i = 0; i < observations.size(); ++i) {
    if (basis.Contains(observations[i].mask) != conflict[i]) ++n;
  }
  return n;
}

}  // namespace

// long: validation, candidate ordering, the multi-start search and the scoring share the
// classified observations; splitting them would pass the same vectors around.
absl::StatusOr<XorHashFit> FitRowSpaceFromScan(const std::vector<MaskObservation>& observations,
                                               const ScanFitOptions& options) {
  MISSILE_RETURN_IF_ERROR(CheckRange(options.low_bit, options.high_bit));
  if (observations.size() < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("a scan fit needs at least 8 observations, got ", observations.size()));
  }
  const uint64_t range = RangeMask(options.low_bit, options.high_bit);
  for (const MaskObservation& o : observations) {
    if (o.mask == 0 || (o.mask & ~range) != 0 || !std::isfinite(o.ratio) || o.ratio < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("observation mask 0x", absl::Hex(o.mask), " ratio ", o.ratio,
                       ": a mask must be non-zero inside bits [", options.low_bit, ", ",
                       options.high_bit, ") and a ratio finite and >= 0"));
    }
  }
  const double threshold = ScanThreshold(observations, options);
  std::vector<bool> conflict(observations.size());
  absl::flat_hash_map<uint64_t, double> strongest;  // conflicting mask -> lowest ratio
  for (size_t i = 0; i < observations.size(); ++i) {
    conflict[i] = observations[i].ratio < threshold;
    if (!conflict[i]) continue;
    auto [it, inserted] = strongest.try_emplace(observations[i].mask, observations[i].ratio);
    if (!inserted) it->second = std::min(it->second, observations[i].ratio);
  }
  // Candidates: conflicts that other conflicts close under XOR first (a real row space is
  // closed, noise is not), then the stronger ones.
  std::vector<std::pair<uint64_t, double>> candidates(strongest.begin(), strongest.end());
  absl::flat_hash_map<uint64_t, int> support;
  for (const auto& [p, ratio_p] : candidates) {
    int n = 0;
    if (candidates.size() <= 4096) {
      for (const auto& [q, ratio_q] : candidates) n += q != p && strongest.contains(p ^ q);
    }
    support[p] = n;
  }
  std::sort(candidates.begin(), candidates.end(), [&](const auto& a, const auto& b) {
    if (support[a.first] != support[b.first]) return support[a.first] > support[b.first];
    if (a.second != b.second) return a.second < b.second;
    return a.first < b.first;
  });
  std::vector<uint64_t> order;
  for (const auto& c : candidates) order.push_back(c.first);
  // Several starts (plain order, and each of the first candidates forced in first), so that one
  // noisy conflict taken early cannot block the real rows; the start that explains the most
  // observations wins (the smaller rank on a tie).
  Gf2Basis basis = GrowBasis(observations, conflict, order, 0);
  int best = Disagreements(basis, observations, conflict);
  for (size_t i = 0; i < std::min<size_t>(order.size(), 16); ++i) {
    Gf2Basis b = GrowBasis(observations, conflict, order, order[i]);
    const int d = Disagreements(b, observations, conflict);
    if (d < best || (d == best && b.rank() < basis.rank())) basis = b, best = d;
  }

  XorHashFit fit;
  fit.low_bit = options.low_bit;
  fit.high_bit = options.high_bit;
  fit.masks = basis.rows();
  std::vector<double> inside, outside;
  for (const MaskObservation& o : observations) {
    (basis.Contains(o.mask) ? inside : outside).push_back(o.ratio);
  }
  double separation = 0;
  if (!inside.empty() && !outside.empty()) {
    // 1 for a full halving of the masks in the row space, 0.5 for a quarter lost.
    const double neutral = Median(outside);
    if (neutral > 0) separation = (neutral - Median(inside)) / (0.5 * neutral);
  }
  Score(fit, static_cast<int>(observations.size()), best, separation);
  return fit;
}

absl::StatusOr<ScanCrossValidation> CrossValidateScan(
    const std::vector<MaskObservation>& observations, const ScanFitOptions& options, int folds,
    uint64_t seed) {
  if (folds < 2 || folds > 20 || observations.size() < static_cast<size_t>(8 * folds)) {
    return absl::InvalidArgumentError(absl::StrCat("cross-validation: ", folds, " folds of ",
                                                   observations.size(), " observations"));
  }
  MISSILE_ASSIGN_OR_RETURN(XorHashFit final_fit, FitRowSpaceFromScan(observations, options));
  std::vector<size_t> order(observations.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  ScanCrossValidation out;
  out.fit = final_fit;
  out.folds = folds;
  int right = 0;
  for (int f = 0; f < folds; ++f) {
    std::vector<MaskObservation> train, test;
    for (size_t i = 0; i < order.size(); ++i) {
      (static_cast<int>(i % static_cast<size_t>(folds)) == f ? test : train)
          .push_back(observations[order[i]]);
    }
    MISSILE_ASSIGN_OR_RETURN(XorHashFit fit, FitRowSpaceFromScan(train, options));
    if (fit.masks == out.fit.masks) ++out.folds_matching;
    const double threshold = ScanThreshold(train, options);
    const Gf2Basis basis(fit.masks);
    for (const MaskObservation& o : test) right += basis.Contains(o.mask) == (o.ratio < threshold);
    out.predictions += static_cast<int>(test.size());
  }
  out.accuracy = static_cast<double>(right) / static_cast<double>(out.predictions);
  return out;
}

absl::StatusOr<double> ScanAccuracy(const XorHashFit& fit,
                                    const std::vector<MaskObservation>& held_out,
                                    double threshold) {
  if (held_out.empty()) return absl::InvalidArgumentError("no held-back observations");
  const Gf2Basis basis(fit.masks);
  int right = 0;
  for (const MaskObservation& o : held_out) {
    if (basis.Contains(o.mask) == (o.ratio < threshold)) ++right;
  }
  return static_cast<double>(right) / static_cast<double>(held_out.size());
}

namespace {

// Asks the oracle `votes` times whether x and x ^ d conflict, each time from a fresh x.
int AskVotes(const ConflictOracle& oracle, uint64_t d, int votes, uint64_t range,
             std::mt19937_64& rng) {
  int yes = 0;
  for (int v = 0; v < votes; ++v) {
    const uint64_t x = rng() & range;
    if (oracle(x, x ^ d)) ++yes;
  }
  return yes;
}

// The difference that tests "column j equals the sum of the pivot columns in subset s".
uint64_t Difference(int bit, uint64_t subset, const std::vector<int>& pivots) {
  uint64_t d = uint64_t{1} << bit;
  for (size_t i = 0; i < pivots.size(); ++i) {
    if (subset & (uint64_t{1} << i)) d ^= uint64_t{1} << pivots[i];
  }
  return d;
}

}  // namespace

// long: the column-by-column search with its two rounds of re-asking, kept together so the
// vote bookkeeping (counts, margins, disagreements) is in one place.
absl::StatusOr<XorHashFit> FitWithConflictOracle(const ConflictOracle& oracle,
                                                 const OracleFitOptions& options) {
  MISSILE_RETURN_IF_ERROR(CheckRange(options.low_bit, options.high_bit));
  if (!oracle) return absl::InvalidArgumentError("no conflict oracle");
  if (options.votes < 1 || options.votes % 2 == 0 || options.votes > 101) {
    return absl::InvalidArgumentError(
        absl::StrCat("votes must be odd and in [1, 101], got ", options.votes));
  }
  if (options.max_rank < 1 || options.max_rank > 12) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rank must be in [1, 12], got ", options.max_rank));
  }
  std::mt19937_64 rng(options.seed);
  const uint64_t range =
      options.high_bit >= 64 ? ~uint64_t{0} : (uint64_t{1} << options.high_bit) - 1;
  std::vector<int> pivots;
  std::vector<uint64_t> rows;  // row i: the address bits whose column has channel bit i
  int asked = 0, contradicted = 0;
  double weakest_margin = 1;
  for (int bit = options.low_bit; bit < options.high_bit; ++bit) {
    const uint64_t subsets = uint64_t{1} << pivots.size();
    std::vector<uint64_t> winners;
    uint64_t best = 0;
    int best_yes = -1;
    for (uint64_t s = 0; s < subsets; ++s) {
      const int yes = AskVotes(oracle, Difference(bit, s, pivots), options.votes, range, rng);
      asked += options.votes;
      if (yes > best_yes) best_yes = yes, best = s;
      if (2 * yes > options.votes) winners.push_back(s);
    }
    // Every decision is confirmed with four times the votes: a noisy "yes" on a wrong
    // combination (among up to 2^rank) or a noisy "no" on the right one would otherwise fix a
    // wrong column for good.
    std::vector<uint64_t> recheck = winners;
    if (recheck.empty() && best_yes > 0) recheck.push_back(best);
    winners.clear();
    for (uint64_t s : recheck) {
      const int votes = 4 * options.votes + 1;
      const int yes = AskVotes(oracle, Difference(bit, s, pivots), votes, range, rng);
      asked += votes;
      if (2 * yes > votes) winners.push_back(s);
    }
    if (winners.size() > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "address bit ", bit, ": ", winners.size(),
          " different column combinations conflict; not an XOR function, or too noisy"));
    }
    if (winners.empty()) {
      if (static_cast<int>(pivots.size()) == options.max_rank) {
        return absl::FailedPreconditionError(
            absl::StrCat("address bit ", bit, " needs channel bit ", pivots.size() + 1,
                         ": more than 2^", options.max_rank, " channels or not an XOR function"));
      }
      pivots.push_back(bit);
      rows.push_back(uint64_t{1} << bit);
      continue;
    }
    for (size_t i = 0; i < pivots.size(); ++i) {
      if (winners[0] & (uint64_t{1} << i)) rows[i] |= uint64_t{1} << bit;
    }
    const double margin =
        2.0 * std::fabs(best_yes - options.votes / 2.0) / static_cast<double>(options.votes);
    weakest_margin = std::min(weakest_margin, margin);
    contradicted += options.votes - best_yes;
  }
  XorHashFit fit;
  fit.low_bit = options.low_bit;
  fit.high_bit = options.high_bit;
  fit.masks = Gf2Basis(rows).rows();
  Score(fit, asked, contradicted, weakest_margin);
  return fit;
}

absl::StatusOr<double> PairAccuracy(const XorHashFit& fit,
                                    const std::vector<PairObservation>& pairs) {
  if (pairs.empty()) return absl::InvalidArgumentError("no address pairs to check");
  int right = 0;
  for (const PairObservation& p : pairs) {
    if ((fit.GroupOf(p.a) == fit.GroupOf(p.b)) == p.conflict) ++right;
  }
  return static_cast<double>(right) / static_cast<double>(pairs.size());
}

absl::StatusOr<ParityFit> FitParityLabels(const std::vector<int>& labels) {
  if (labels.size() < 2 || labels.size() > (size_t{1} << 24) ||
      !std::has_single_bit(labels.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("parity fit needs 2^n labels (n in 1..24), got ", labels.size()));
  }
  std::vector<int64_t> w(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("label ", i, " is ", labels[i], ", not 0/1"));
    }
    w[i] = labels[i] ? -1 : 1;
  }
  // w[m] becomes sum over g of (-1)^(label(g) + parity(g & m)): the agreement with mask m, less
  // the disagreement.
  for (size_t h = 1; h < w.size(); h <<= 1) {
    for (size_t i = 0; i < w.size(); i += 2 * h) {
      for (size_t j = i; j < i + h; ++j) {
        const int64_t a = w[j], b = w[j + h];
        w[j] = a + b;
        w[j + h] = a - b;
      }
    }
  }
  const double n = static_cast<double>(w.size());
  ParityFit fit;
  int64_t best = -1;
  for (size_t m = 0; m < w.size(); ++m) {
    const int64_t magnitude = w[m] < 0 ? -w[m] : w[m];
    const double agreement = (n + static_cast<double>(magnitude)) / (2 * n);
    if (magnitude > best) {
      if (best >= 0) fit.runner_up = std::max(fit.runner_up, fit.agreement);
      best = magnitude;
      fit.mask = m;
      fit.constant = w[m] < 0 ? 1 : 0;
      fit.agreement = agreement;
    } else {
      fit.runner_up = std::max(fit.runner_up, agreement);
    }
  }
  return fit;
}

absl::StatusOr<GranularityColours> ColoursAtGranularity(const XorHashFit& fit,
                                                        uint64_t granularity_bytes) {
  if (granularity_bytes == 0 || !std::has_single_bit(granularity_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("granularity ", granularity_bytes, " is not a power of two"));
  }
  const int log2 = std::countr_zero(granularity_bytes);
  const uint64_t below = (uint64_t{1} << log2) - 1;
  Gf2Basis low;
  uint64_t used_below = 0;
  for (uint64_t m : fit.masks) {
    low.Add(m & below);
    used_below |= m & below;
  }
  GranularityColours out;
  out.granularity_bytes = granularity_bytes;
  const int free_rows = fit.rank() - low.rank();
  out.colours = 1 << free_rows;
  out.merging_bits = BitsOf(used_below);
  out.above_observed_range = log2 >= fit.high_bit;
  const std::string size = granularity_bytes >= (1u << 20)
                               ? absl::StrCat(granularity_bytes >> 20, " MiB")
                               : absl::StrCat(granularity_bytes >> 10, " KiB");
  if (fit.masks.empty()) {
    out.reason = absl::StrCat(size, " chunks: 1 colour; no channel hash bit was visible between ",
                              "address bits ", fit.low_bit, " and ", fit.high_bit - 1);
  } else if (free_rows == 0) {
    out.reason = absl::StrCat(
        size, " chunks: 1 colour; all ", fit.groups(), " channel groups of the fitted hash ",
        "depend on address bits below ", log2, " (bits ", FormatBitList(out.merging_bits),
        "), which vary inside every chunk, so every chunk spans every group");
  } else if (out.merging_bits.empty()) {
    out.reason = absl::StrCat(size, " chunks: ", out.colours, " colours; every one of the ",
                              fit.groups(), " channel groups is selected by address bits ", log2,
                              " and up only, which are constant inside a chunk");
  } else {
    out.reason = absl::StrCat(size, " chunks: ", out.colours, " colours of ", fit.groups(),
                              " channel groups; bits ", FormatBitList(out.merging_bits), " below ",
                              log2, " vary inside a chunk and merge the rest");
  }
  if (out.above_observed_range) {
    absl::StrAppend(&out.reason, " (bits ", fit.high_bit,
                    " and up were not observable: chunk-level measurements decide those)");
  }
  return out;
}

std::string FormatBitList(const std::vector<int>& bits) {
  std::vector<int> sorted = bits;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    parts.push_back(j > i ? absl::StrCat(sorted[i], "-", sorted[j]) : absl::StrCat(sorted[i]));
    i = j + 1;
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

}  // namespace missile::colorer

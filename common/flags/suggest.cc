#include "missile/flags/suggest.h"

#include <algorithm>

namespace missile::flags {

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the swap of adjacent characters looks two rows back.
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);
      }
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& candidates) {
  // Leading dashes are the same in every option: they do not make a short word longer.
  const size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
  const size_t limit = std::clamp<size_t>(letters / 3, 1, 3);
  std::string_view best;
  size_t best_distance = limit + 1;
  bool tie = false;
  for (std::string_view c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
      tie = false;
    } else if (d == best_distance && c != best) {
      tie = true;
    }
  }
  if (best_distance > limit || tie) return "";
  return "; did you mean '" + std::string(best) + "'?";
}

}  // namespace missile::flags

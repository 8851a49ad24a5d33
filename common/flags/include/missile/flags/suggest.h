// "Did you mean" for mistyped commands and options: the nearest candidate by edit distance,
// where it is near enough to be a typo rather than another word. Pure functions: thread-safe.
#ifndef MISSILE_FLAGS_SUGGEST_H_
#define MISSILE_FLAGS_SUGGEST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace missile::flags {

// Insertions, deletions, substitutions and swaps of two adjacent characters, each counting 1
// (the optimal string alignment distance): "stauts" is 1 from "status".
size_t EditDistance(std::string_view a, std::string_view b);

// "; did you mean 'X'?" for the candidate nearest to `word`, or "" when none is within a third
// of the word's length (at least 1, at most 3) or two candidates are equally near.
std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace missile::flags

#endif  // MISSILE_FLAGS_SUGGEST_H_

// ChannelSet / ColourSet: a set of small indices (0..63) held in one 64-bit word.
//
// Contract: a value type; every operation is O(1) except ToString() and Indices(). Indices
// outside [0, 64) are a programming error (checked by assert in debug builds, ignored by Add in
// release builds so a bad index can never corrupt memory). Thread-safety: like an int.
// Two distinct types (channels, colours) share one template so they cannot be mixed by mistake.

#ifndef MISSILE_COLORER_CHANNEL_SET_H_
#define MISSILE_COLORER_CHANNEL_SET_H_

#include <bit>
#include <cassert>
#include <cstdint>
#include <string>
#include <vector>

namespace missile::colorer {

// The most channels (and colours) any map or scheme may have.
inline constexpr int kMaxChannels = 64;

template <typename Tag>
class IndexSet64 {
 public:
  constexpr IndexSet64() = default;
  static constexpr IndexSet64 FromBits(uint64_t bits) { return IndexSet64(bits); }
  static constexpr IndexSet64 Single(int index) { return IndexSet64().With(index); }
  // {0, 1, ..., n-1}; n is clamped to [0, 64].
  static constexpr IndexSet64 FirstN(int n) {
    if (n <= 0) return IndexSet64();
    if (n >= 64) return IndexSet64(~uint64_t{0});
    return IndexSet64((uint64_t{1} << n) - 1);
  }

  constexpr void Add(int index) {
    assert(index >= 0 && index < 64);
    if (index >= 0 && index < 64) bits_ |= uint64_t{1} << index;
  }
  constexpr IndexSet64 With(int index) const {
    IndexSet64 s = *this;
    s.Add(index);
    return s;
  }
  constexpr bool Contains(int index) const {
    return index >= 0 && index < 64 && ((bits_ >> index) & 1) != 0;
  }
  constexpr int Count() const { return std::popcount(bits_); }
  constexpr bool Empty() const { return bits_ == 0; }
  // Lowest member, or -1 when empty.
  constexpr int Lowest() const { return bits_ == 0 ? -1 : std::countr_zero(bits_); }
  constexpr bool IsSubsetOf(IndexSet64 other) const { return (bits_ & ~other.bits_) == 0; }
  constexpr bool Intersects(IndexSet64 other) const { return (bits_ & other.bits_) != 0; }
  constexpr uint64_t bits() const { return bits_; }

  std::vector<int> Indices() const {
    std::vector<int> out;
    for (uint64_t b = bits_; b != 0; b &= b - 1) out.push_back(std::countr_zero(b));
    return out;
  }
  // "{0,3,5}".
  std::string ToString() const {
    std::string s = "{";
    for (uint64_t b = bits_; b != 0; b &= b - 1) {
      if (s.size() > 1) s += ',';
      s += std::to_string(std::countr_zero(b));
    }
    return s + "}";
  }

  constexpr IndexSet64& operator|=(IndexSet64 o) {
    bits_ |= o.bits_;
    return *this;
  }
  constexpr IndexSet64& operator&=(IndexSet64 o) {
    bits_ &= o.bits_;
    return *this;
  }
  friend constexpr IndexSet64 operator|(IndexSet64 a, IndexSet64 b) { return a |= b; }
  friend constexpr IndexSet64 operator&(IndexSet64 a, IndexSet64 b) { return a &= b; }
  friend constexpr bool operator==(IndexSet64 a, IndexSet64 b) = default;

 private:
  constexpr explicit IndexSet64(uint64_t bits) : bits_(bits) {}
  uint64_t bits_ = 0;
};

struct ChannelTag {};
struct ColourTag {};
// A set of VRAM channels (indices into a ChannelMap).
using ChannelSet = IndexSet64<ChannelTag>;
// A set of colours (indices into a ColourScheme).
using ColourSet = IndexSet64<ColourTag>;

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_CHANNEL_SET_H_

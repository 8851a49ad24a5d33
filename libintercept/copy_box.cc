#include "copy_box.h"

namespace missile::shim {
namespace {

void Add(BoxParts* parts, BoxPart p) {
  if (p.width != 0 && p.height != 0 && p.depth != 0) parts->part[parts->count++] = p;
}

// Payload bytes [begin, end) of plane z, both within one plane (end <= width * height).
void SplitPlane(uint64_t width, uint64_t z, uint64_t begin, uint64_t end, BoxParts* parts) {
  uint64_t y0 = begin / width, x0 = begin % width;
  const uint64_t y1 = end / width, x1 = end % width;
  if (y0 == y1) {  // within one row
    Add(parts, {x0, y0, z, x1 - x0, 1, 1});
    return;
  }
  if (x0 != 0) {
    Add(parts, {x0, y0, z, width - x0, 1, 1});
    ++y0;
  }
  Add(parts, {0, y0, z, width, y1 - y0, 1});
  Add(parts, {0, y1, z, x1, 1, 1});
}

}  // namespace

std::optional<uint64_t> BoxBytes(uint64_t width, uint64_t height, uint64_t depth) {
  uint64_t plane = 0, all = 0;
  if (__builtin_mul_overflow(width, height, &plane) || __builtin_mul_overflow(plane, depth, &all)) {
    return std::nullopt;
  }
  return all;
}

BoxParts SplitBox(uint64_t width, uint64_t height, uint64_t depth, uint64_t begin, uint64_t end) {
  BoxParts parts;
  if (width == 0 || height == 0 || depth == 0 || begin >= end) return parts;  // nothing to move
  const uint64_t plane = width * height;
  uint64_t z0 = begin / plane;
  const uint64_t z1 = end / plane;
  const uint64_t head = begin % plane, tail = end % plane;
  if (z0 == z1) {  // within one plane
    SplitPlane(width, z0, head, tail, &parts);
    return parts;
  }
  if (head != 0) {
    SplitPlane(width, z0, head, plane, &parts);
    ++z0;
  }
  Add(&parts, {0, 0, z0, width, height, z1 - z0});
  if (tail != 0) SplitPlane(width, z1, 0, tail, &parts);
  return parts;
}

}  // namespace missile::shim

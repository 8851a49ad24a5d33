// Cutting a 2D or 3D copy into the PCIe scheduler's chunks (pure logic, no CUDA).
//
// The scheduler cuts every copy at byte offsets of its payload: the bytes that cross the bus,
// width x height x depth of them, counted row by row and plane by plane as if packed. A chunk
// [begin, end) of a box then starts and ends anywhere in a row; SplitBox turns it into the few
// rectangular parts that a 2D or 3D copy of the same description can move: a partial first
// row, whole rows, whole planes, whole rows and a partial last row. Offsets are relative to the
// copy's own origin (its srcXInBytes/srcY/srcZ and dstXInBytes/dstY/dstZ).
#ifndef MISSILE_LIBINTERCEPT_COPY_BOX_H_
#define MISSILE_LIBINTERCEPT_COPY_BOX_H_

#include <array>
#include <cstdint>
#include <optional>

namespace missile::shim {

struct BoxPart {
  uint64_t x = 0;       // bytes into the row
  uint64_t y = 0;       // rows into the plane
  uint64_t z = 0;       // planes
  uint64_t width = 0;   // bytes
  uint64_t height = 0;  // rows
  uint64_t depth = 0;   // planes
};

// At most five parts: head row, head rows, whole planes, tail rows, tail row.
struct BoxParts {
  std::array<BoxPart, 5> part;
  int count = 0;
};

// The payload of a width x height x depth box in bytes, or nullopt if it overflows.
std::optional<uint64_t> BoxBytes(uint64_t width, uint64_t height, uint64_t depth);

// The parts covering payload bytes [begin, end) of the box, in payload order; none for an empty
// box or range. Requires end <= the payload (BoxBytes). The whole payload is one part.
BoxParts SplitBox(uint64_t width, uint64_t height, uint64_t depth, uint64_t begin, uint64_t end);

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_COPY_BOX_H_

#include "missile/common/pacing_region.h"

#include <time.h>

namespace missile::pacingreg {

void InitRegion(Region* r) {
  r->header.magic = kMagic;
  r->header.version = kVersion;
  r->header.slots = kSlots;
  r->header.lanes = kLanes;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace missile::pacingreg

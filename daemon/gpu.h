// One managed GPU as the daemon's core sees it: its identity and the per-GPU pieces that serve
// its tenants. No CUDA here: the memory comes from a BlockSource, so tests build a Gpu over a
// fake source and run DaemonCore in one process.
#ifndef MISSILE_DAEMON_GPU_H_
#define MISSILE_DAEMON_GPU_H_

#include <cstdint>
#include <memory>
#include <string>

#include "copy_arbiter.h"
#include "pacing_domain.h"
#include "vram_pool.h"

namespace missile::daemon {

struct DeviceInfo {
  int ordinal = 0;
  std::string uuid;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string name;
  uint64_t total_bytes = 0;
  uint64_t granularity = 0;  // recommended VMM granularity: the block unit
};

// Destruction order matters: the pool (declared after the source) goes first, and destroys its
// blocks through the source.
struct Gpu {
  DeviceInfo info;
  std::unique_ptr<BlockSource> source;   // the physical blocks (CudaDevice in the daemon)
  std::unique_ptr<VramPool> pool;        // over `source`
  std::unique_ptr<CopyArbiter> arbiter;  // PCIe copies, both directions (null: not scheduled)
  std::unique_ptr<PacingDomain> pacing;  // BE pacing next to LS work (null: not paced)
  int colours = 1;
  std::string colour_note;
  QuotaPolicy quota[2];  // the pool's class quotas, indexed by ClassIndex
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_GPU_H_

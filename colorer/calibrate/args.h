// missile-calibrate's command line and the measurement plan derived from it. Pure logic.
//
// Contract:
// - ParseArgs takes argv without the program name and parses it with CLI11 (missile/flags);
//   "--flag value" and "--flag=value" both work; the last of a repeated option wins. Unknown
//   flags (with "did you mean"), missing or malformed values and out-of-range numbers are
//   INVALID_ARGUMENT naming the flag.
// - --channel-map selects the channel-map mode (channel_scan.h); --chunks then defaults to 16.
// - --quick changes the defaults of --chunks and --sample (explicit values win) and shortens
//   every measurement (MakePlan).
// - Free functions over values: safe from any thread.

#ifndef MISSILE_COLORER_CALIBRATE_ARGS_H_
#define MISSILE_COLORER_CALIBRATE_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace missile::calibrate {

inline constexpr char kDefaultProfileDir[] = "/var/lib/missile/profiles";

struct CalibrateArgs {
  std::string out_dir = kDefaultProfileDir;
  uint32_t chunks = 4096;  // 8 GiB of 2 MiB chunks
  uint32_t sample = 64;    // chunks the classifier sorts into colours
  uint64_t seed = 1;
  bool quick = false;
  int device = 0;
  bool json = false;
  // --channel-map: recover the channel hash inside one chunk instead of the colour profile
  // (channel_scan.h); --chunks then defaults to 16.
  bool channel_map = false;
  bool help = false;
  bool version = false;
};

inline constexpr uint32_t kMinChunks = 16;
inline constexpr uint32_t kMaxChunks = 65536;  // 128 GiB of 2 MiB chunks
inline constexpr uint32_t kMinSample = 2;
inline constexpr uint32_t kMaxSample = 256;

absl::StatusOr<CalibrateArgs> ParseArgs(const std::vector<std::string>& args);
std::string Usage();

// How long and how often each measurement runs. Sized for an H200 (4.37 TB/s streaming, a
// 33-SM victim at 639 GB/s: docs/hardware/h200.md, "VRAM channels") so defaults stay well
// under 3 minutes and --quick under 40 s; kernel run times scale with the chunk set, not with
// the GPU.
struct Plan {
  uint32_t chunks = 0;
  uint32_t sample = 0;
  uint64_t seed = 0;
  double target_ms = 4;              // GPU time of one timed launch
  int bandwidth_repeats = 10;        // timed launches per set (median), after one warm-up
  uint32_t contiguous_run = 64;      // chunks in a contiguous run (128 MiB, twice the L2)
  std::vector<uint64_t> half_seeds;  // one random half/half split per seed
  int split_repeats = 7;             // alone/under pairs per split (median)
  int oracle_repeats = 5;            // alone/under pairs per oracle call (median)
  double oracle_target_ms = 3;
  int classifier_max_repeats = 4;
  int64_t max_oracle_calls = 1500;
  uint32_t latency_iters = 32;          // dependent loads per probe
  uint32_t latency_scan_bytes = 65536;  // fine scan: every 64 B of the first 64 KiB of a chunk
  uint32_t latency_chunks = 256;        // chunks whose mean latency is compared
  double wait_timeout_s = 10;           // longest wait for one batch of GPU work
};

Plan MakePlan(const CalibrateArgs& args);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_ARGS_H_

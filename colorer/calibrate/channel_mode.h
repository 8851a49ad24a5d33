// missile-calibrate --channel-map: opens the GPU, allocates chunks as the daemon does, runs the
// channel scan (channel_scan.h) on one of them and writes, in the output directory:
//   <uuid>.channels.toml      the map file missiled reads (colorer/channel_map_file.h)
//   <uuid>.channels.txt       the text report (also printed)
//   <uuid>.channels.pairs.csv bandwidth under contention per predicted colour pair
//   <uuid>.channels.scan.csv  every scanned mask's bandwidth ratio
//   <uuid>.channels.latency.csv  L2-hit latency per granule (the L2 slice signature)
// Errors are returned as statuses naming what failed; nothing is written before the scan ends.
// Called once, from main's thread.

#ifndef MISSILE_COLORER_CALIBRATE_CHANNEL_MODE_H_
#define MISSILE_COLORER_CALIBRATE_CHANNEL_MODE_H_

#include "absl/status/status.h"
#include "args.h"
#include "spdlog/spdlog.h"

namespace missile::calibrate {

absl::Status RunChannelMap(const CalibrateArgs& args, spdlog::logger& log);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_CHANNEL_MODE_H_

// What missile-calibrate --channel-map writes: the map file (colorer/channel_map_file.h), the
// CSV of bandwidth under contention per predicted colour pair, the CSV of every scanned mask,
// and the text report. Pure logic, no CUDA.
//
// Contract: free functions over values, safe from any thread. BuildChannelMapFile returns only
// files that pass colorer::ValidateChannelMapFile.

#ifndef MISSILE_COLORER_CALIBRATE_CHANNEL_REPORT_H_
#define MISSILE_COLORER_CALIBRATE_CHANNEL_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "channel_scan.h"
#include "missile/colorer/channel_map_file.h"
#include "report.h"

namespace missile::calibrate {

absl::StatusOr<colorer::ChannelMapFile> BuildChannelMapFile(
    const GpuIdentity& gpu, const ChannelScanResult& result, const ChannelPlan& plan,
    std::string date, std::string tool_version, double seconds);

// Header: victim_colour,aggressor_colour,predicted_conflict,alone_gbps,under_gbps,slowdown,
// measured_conflict
std::string PairsCsv(const ChannelScanResult& result);
// Header: source,mask,bits,ratio,conflict,in_fit_span
std::string ScanCsv(const ChannelScanResult& result);
// Header: offset,cycles_per_load (empty when the latency signature was not measured)
std::string LatencyCsv(const ChannelScanResult& result, int granule_shift);
// The human-readable report: per source the bandwidths, the fitted function, agreement and
// held-back accuracy; the contention matrix; the colours per granularity and why.
std::string ChannelReport(const colorer::ChannelMapFile& file, const ChannelScanResult& result);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_CHANNEL_REPORT_H_

// Measurement 3: L2-hit latency by address (single-thread pointer chase), to show how finely
// the memory system interleaves addresses and whether whole chunks differ.

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "measure.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {
namespace {

// Probe spacing of the fine scan: half a 128-byte L2 line.
constexpr uint64_t kScanStep = 64;
// Latency levels closer than this are the same level, whatever the noise: the H200's levels
// are 258-312 cycles apart in steps of several cycles (docs/hardware/h200.md, "VRAM channels").
constexpr double kMinToleranceCycles = 4;
constexpr uint32_t kProbesPerStride = 64;
constexpr uint32_t kProbesPerChunk = 32;

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

absl::StatusOr<std::vector<double>> PerLoad(MeasureDevice& device,
                                            const std::vector<uint64_t>& probes, uint32_t iters) {
  MISSILE_ASSIGN_OR_RETURN(std::vector<uint64_t> cycles, device.ChaseCycles(probes, iters));
  if (cycles.size() != probes.size()) {
    return absl::InternalError("latency: wrong number of results from the chase");
  }
  std::vector<double> out;
  for (uint64_t c : cycles) out.push_back(static_cast<double>(c) / std::max(iters, 1u));
  return out;
}

}  // namespace

// long: the fine scan, the chunk sweep and the evidence they write, in the order the evidence
// file reports them; each stage reuses the permutation and base address of the first.
absl::Status MeasureLatency(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                            const Progress& progress) {
  const uint64_t chunk_bytes = device.info().identity.granularity_bytes;
  const uint32_t n = device.chunk_count();
  const std::vector<uint32_t> order = SeededPermutation(n, plan.seed ^ 0x1a7e11ULL);
  const uint64_t base = device.chunk_address(order[0]);
  const uint32_t iters = std::max(plan.latency_iters, 1u);

  // Fine scan: every 64 bytes of the start of one chunk, twice (the difference is the noise).
  std::vector<uint64_t> scan;
  const uint64_t scan_bytes = std::min<uint64_t>(plan.latency_scan_bytes, chunk_bytes);
  for (uint64_t off = 0; off < scan_bytes; off += kScanStep) scan.push_back(base + off);
  MISSILE_ASSIGN_OR_RETURN(std::vector<double> a, PerLoad(device, scan, iters));
  MISSILE_ASSIGN_OR_RETURN(std::vector<double> b, PerLoad(device, scan, iters));
  std::vector<double> lat(scan.size()), diff(scan.size());
  for (size_t i = 0; i < scan.size(); ++i) {
    lat[i] = 0.5 * ((a)[i] + (b)[i]);
    diff[i] = std::fabs((a)[i] - (b)[i]);
  }
  std::sort(diff.begin(), diff.end());
  const double noise = diff.empty() ? 0 : diff[diff.size() * 95 / 100];
  const double tolerance = std::max(kMinToleranceCycles, 3 * noise);
  // The largest aligned block size inside which the latency stays within the tolerance.
  uint64_t constant_block = kScanStep;
  for (uint64_t block = 2 * kScanStep; block <= scan_bytes; block *= 2) {
    const size_t per = block / kScanStep;
    bool flat = true;
    for (size_t i = 0; i + per <= lat.size() && flat; i += per) {
      const auto [lo, hi] = std::minmax_element(lat.begin() + i, lat.begin() + i + per);
      flat = *hi - *lo <= tolerance;
    }
    if (!flat) break;
    constant_block = block;
  }
  const auto [scan_lo, scan_hi] = std::minmax_element(lat.begin(), lat.end());
  evidence.Add("latency_scan_bytes", static_cast<double>(scan_bytes), "bytes");
  evidence.Add("latency_scan_mean", Mean(lat), "cycles");
  evidence.Add("latency_scan_min", *scan_lo, "cycles");
  evidence.Add("latency_scan_max", *scan_hi, "cycles");
  evidence.Add("latency_noise_p95", noise, "cycles");
  evidence.Add("latency_constant_block", static_cast<double>(constant_block), "bytes");
  if (progress) {
    progress(
        absl::StrFormat("latency scan of %d KiB: %.0f-%.0f cycles, constant within %d-byte "
                        "blocks (tolerance %.1f cycles)",
                        static_cast<int>(scan_bytes >> 10), *scan_lo, *scan_hi,
                        static_cast<int>(constant_block), tolerance));
  }

  // Strides 256 B .. 64 KiB inside the same chunk.
  std::vector<uint64_t> probes;
  std::vector<std::pair<uint64_t, size_t>> strides;  // stride, probe count
  for (uint64_t stride = 256; stride <= 65536 && stride < chunk_bytes; stride *= 2) {
    const uint64_t count = std::min<uint64_t>(kProbesPerStride, chunk_bytes / stride);
    for (uint64_t k = 0; k < count; ++k) probes.push_back(base + k * stride);
    strides.emplace_back(stride, count);
  }
  MISSILE_ASSIGN_OR_RETURN(std::vector<double> by_stride, PerLoad(device, probes, iters));
  size_t at = 0;
  for (const auto& [stride, count] : strides) {
    std::vector<double> v(by_stride.begin() + at, by_stride.begin() + at + count);
    at += count;
    int changes = 0;
    for (size_t i = 1; i < v.size(); ++i) changes += std::fabs(v[i] - v[i - 1]) > tolerance;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    const std::string key = absl::StrCat("latency_stride_", stride, "B");
    evidence.Add(key + "_mean", Mean(v), "cycles");
    evidence.Add(key + "_spread", *hi - *lo, "cycles");
    evidence.Add(key + "_changes", v.size() > 1 ? changes / (v.size() - 1.0) : 0, "fraction");
  }

  // Across chunks: the mean latency of 32 addresses spread over each of many chunks.
  probes.clear();
  const uint32_t chunks = std::min(plan.latency_chunks, n);
  for (uint32_t c = 0; c < chunks; ++c) {
    const uint64_t chunk = device.chunk_address(order[c]);
    for (uint64_t k = 0; k < kProbesPerChunk; ++k) {
      probes.push_back(chunk + k * (chunk_bytes / kProbesPerChunk) + (k % 8) * 256);
    }
  }
  MISSILE_ASSIGN_OR_RETURN(std::vector<double> by_chunk, PerLoad(device, probes, iters));
  std::vector<double> means;
  for (uint32_t c = 0; c < chunks; ++c) {
    means.push_back(Mean(std::vector<double>(by_chunk.begin() + c * kProbesPerChunk,
                                             by_chunk.begin() + (c + 1) * kProbesPerChunk)));
  }
  if (!means.empty()) {
    const double mean = Mean(means);
    double var = 0;
    for (double m : means) var += (m - mean) * (m - mean);
    const auto [lo, hi] = std::minmax_element(means.begin(), means.end());
    evidence.Add("latency_chunks_probed", chunks, "chunks");
    evidence.Add("latency_chunk_mean_avg", mean, "cycles");
    evidence.Add("latency_chunk_mean_min", *lo, "cycles");
    evidence.Add("latency_chunk_mean_max", *hi, "cycles");
    evidence.Add("latency_chunk_mean_stddev", std::sqrt(var / means.size()), "cycles");
    if (progress) {
      progress(absl::StrFormat("latency per chunk (%u chunks): mean %.1f cycles, %.1f-%.1f", chunks,
                               mean, *lo, *hi));
    }
  }
  return absl::OkStatus();
}

}  // namespace missile::calibrate

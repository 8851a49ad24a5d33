// pacer_cost: what pacing one work item costs the thread that submits it, on the CPU alone (no
// GPU): the shim's Pacer (Begin and End around each item, as pacing_hooks.h runs them) against
// missiled's PacingDomain in the same process, the two driver calls a paced item makes
// stubbed (the completion write is a store into the lanes page, as the GPU's would be once the
// item ran; the capture check answers "not capturing"). The real driver's calls are not in these
// numbers: a completion write costs the host about as much as any stream operation.
//
// Per state, ITEMS items one after another on one stream, timed in batches of 1,000: the median
// and the range of the batches' ns per item.
//   ls-marking      an LS tenant beside a BE tenant: its item is marked (a store, and the write)
//   be-ls-idle      a BE tenant beside an LS tenant with nothing in flight: admitted at once
//   be-released     a BE tenant beside a busy LS tenant whose budget released it (the share
//                   missiled publishes at the budget's last step): no window, no hold
// Each state twice: with abseil's lock-order check as the library was built (Debian's abseil and
// the shim's own are built without NDEBUG, so it is on), and with it off, as the shim and
// missiled run it (Shim::Shim, missiled's Run).
// usage: pacer_cost [ITEMS]   (default 200000)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "pacer.h"
#include "pacing_domain.h"
#include "spdlog/sinks/null_sink.h"
#include "testing/recording_driver.h"

namespace {

using missile::daemon::PacingDomain;
using missile::daemon::PacingSettings;
using missile::TenantClass;
using missile::shim::DriverApi;
using missile::shim::Pacer;

constexpr uint64_t kLsSession = 1;
constexpr uint64_t kBeSession = 2;

CUresult WriteNow(CUstream, CUdeviceptr addr, cuuint64_t value, unsigned int) {
  // The recording driver maps host memory 1:1, so the "device" address is the lanes page's.
  reinterpret_cast<std::atomic<uint64_t>*>(addr)->store(value, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult NotCapturing(CUstream, CUstreamCaptureStatus* status) {
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

std::unique_ptr<Pacer> Open(PacingDomain* domain, uint64_t session, TenantClass cls,
                            const DriverApi& api, spdlog::logger* log) {
  auto fds = domain->Join(session, static_cast<int>(100 + session), cls, 1);
  if (!fds.ok()) {
    std::fprintf(stderr, "join: %s\n", std::string(fds.status().message()).c_str());
    std::exit(1);
  }
  auto opener = [domain, session](uint32_t slot, uint64_t epoch) {
    return domain->OpenPeerLanes(session, slot, epoch);
  };
  auto p = Pacer::Open(fds->directory, fds->lanes, session, nullptr, opener, api, log);
  if (!p.ok()) {
    std::fprintf(stderr, "pacer: %s\n", std::string(p.status().message()).c_str());
    std::exit(1);
  }
  domain->PublishSealed();
  return std::move(*p);
}

const char* g_check = "on";

void Measure(const char* state, Pacer& pacer, size_t items) {
  constexpr size_t kBatch = 1000;
  const CUstream stream = reinterpret_cast<CUstream>(0x1000);
  std::vector<double> per_item;
  uint64_t key = 0;
  for (size_t done = 0; done < items; done += kBatch) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kBatch; ++i) {
      // A few hundred kernels, as a model's layers: the predictor's table is that size.
      key = key % 400 + 1;
      Pacer::Ticket t = pacer.Begin(stream, false, key);
      pacer.End(t, CUDA_SUCCESS);
    }
    const auto t1 = std::chrono::steady_clock::now();
    per_item.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
  }
  std::sort(per_item.begin(), per_item.end());
  std::printf("%-12s lock-order check %-3s %8.0f ns per item (batches %.0f-%.0f), held %llu\n",
              state, g_check,
              per_item[per_item.size() / 2], per_item.front(), per_item.back(),
              static_cast<unsigned long long>(pacer.held()));
}

}  // namespace

int main(int argc, char** argv) {
  const size_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200'000;
  if (items < 1000) {
    std::fprintf(stderr, "usage: pacer_cost [ITEMS >= 1000]\n");
    return 2;
  }
  missile::shim::testing::RecordingDriver driver;
  DriverApi api = driver.api();
  api.StreamWriteValue64 = &WriteNow;
  api.StreamWriteValue64Ptsz = &WriteNow;
  api.StreamIsCapturing = &NotCapturing;
  api.StreamIsCapturingPtsz = &NotCapturing;
  auto log = std::make_shared<spdlog::logger>("pacer_cost",
                                              std::make_shared<spdlog::sinks::null_sink_mt>());
  PacingSettings settings;  // missiled's defaults
  auto domain = PacingDomain::Create(settings);
  if (!domain.ok()) {
    std::fprintf(stderr, "domain: %s\n", std::string(domain.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<Pacer> ls = Open(domain->get(), kLsSession, TenantClass::kLatencySensitive, api,
                                   log.get());
  std::unique_ptr<Pacer> be = Open(domain->get(), kBeSession, TenantClass::kBestEffort, api,
                                   log.get());
  if (!ls->Paces() || !be->Paces()) {
    std::fprintf(stderr, "the tenants do not pace (pacing off in the defaults?)\n");
    return 1;
  }
  for (const bool check : {true, false}) {
    if (!check) {
      absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
      g_check = "off";
    }
    (*domain)->SetBeShareForTesting(kLsSession, 0, 1);
    Measure("ls-marking", *ls, items);
    Measure("be-ls-idle", *be, items);
    // The LS busy from here on: an item submitted and not completed (its lane stays locked by
    // the ticket, which only this thread's LS would need).
    Pacer::Ticket busy = ls->Begin(reinterpret_cast<CUstream>(0x2000), false, 1);
    (*domain)->SetBeShareForTesting(kLsSession, missile::pacing::kUnheldSharePpm,
                                    missile::pacing::kMaxWindowScale);
    Measure("be-released", *be, items);
    ls->End(busy, CUDA_SUCCESS);
  }
  return 0;
}

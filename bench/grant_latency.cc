// grant_latency: how long a tenant waits for its first grant from the copy arbiter, on the CPU
// alone (no GPU, no driver): the time from posting a request (marked arrived, as a copy on an
// idle stream is) until its first gate opens. An LS tenant posts one request every GAP_MS
// milliseconds with the link otherwise idle, which is when the arbiter may have gone to sleep.
// Run for the (pcie.spin_us, pcie.ls_spin_us) pairs given on the command line as SPIN:LS_SPIN,
// with the requests coming from an LS tenant.
// usage: grant_latency [COUNT [GAP_MS [SPIN_US:LS_SPIN_US...]]]
//        (defaults 2000, 5, 200:0 0:0 200:20000)
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "copy_arbiter.h"

namespace {

using missile::copych::GateOf;
using missile::copych::kGates;
using missile::copych::kHostToDevice;
using missile::daemon::CopyArbiter;
using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? atoi(argv[1]) : 2000;
  const double gap_ms = argc > 2 ? atof(argv[2]) : 5;
  std::vector<std::pair<int, int>> spins;
  for (int i = 3; i < argc; ++i) {
    const char* colon = strchr(argv[i], ':');
    spins.emplace_back(atoi(argv[i]), colon ? atoi(colon + 1) : 0);
  }
  if (spins.empty()) spins = {{200, 0}, {0, 0}, {200, 20000}};
  printf("grant_latency: %d requests of 4 MiB (2 MiB chunks), one every %.1f ms, link idle\n",
         count, gap_ms);
  printf("%10s %10s %10s %10s %10s %10s\n", "spin_us", "ls_spin_us", "p50_us", "p90_us", "p99_us",
         "max_us");
  for (auto [spin, ls_spin] : spins) {
    CopyArbiter::Options o;
    o.spin_ns = static_cast<uint64_t>(spin) * 1000;
    o.ls_spin_ns = static_cast<uint64_t>(ls_spin) * 1000;
    auto arbiter = CopyArbiter::Create(o);
    if (!arbiter.ok()) {
      fprintf(stderr, "%s\n", arbiter.status().ToString().c_str());
      return 1;
    }
    auto fds = (*arbiter)->OpenChannel(1, missile::TenantClass::kLatencySensitive, 1024);
    if (!fds.ok()) return 1;
    void* p = mmap(nullptr, missile::copych::kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                   fds->first, 0);
    auto* region = static_cast<missile::copych::Region*>(p);
    missile::copych::Ring& r = region->ring[kHostToDevice];
    std::vector<double> us;
    uint64_t head = 0;
    uint32_t first = 0;
    for (int i = 0; i < count; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(gap_ms * 1000)));
      for (uint32_t k = 0; k < 2; ++k) {
        r.gates.go[GateOf(first, k)] = 0;
        r.gates.done[GateOf(first, k)] = 0;
      }
      r.gates.arrived[first] = 1;
      auto t0 = Clock::now();
      r.requests[head % kGates] = {4 << 20, region->chunk_bytes.load(), first, 0};
      r.request_head.store(++head, std::memory_order_release);
      uint64_t one = 1;
      (void)!write(fds->second, &one, sizeof(one));
      while (r.gates.go[first].load(std::memory_order_acquire) == 0) {
      }
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      // Both chunks finish at once, as if copied.
      while (r.gates.go[GateOf(first, 1)].load(std::memory_order_acquire) == 0) {
        r.gates.done[first] = missile::copych::kDoneCopied;
      }
      r.gates.done[first] = missile::copych::kDoneCopied;
      r.gates.done[GateOf(first, 1)] = missile::copych::kDoneCopied;
      while (r.gates.done[GateOf(first, 1)].load() != missile::copych::kDoneCounted) {
      }
      first = GateOf(first, 2);
    }
    std::sort(us.begin(), us.end());
    auto at = [&](double q) { return us[static_cast<size_t>(q * (us.size() - 1) + 0.5)]; };
    printf("%10d %10d %10.1f %10.1f %10.1f %10.1f\n", spin, ls_spin, at(0.5), at(0.9), at(0.99),
           us.back());
    munmap(p, missile::copych::kRegionBytes);
    close(fds->first);
    close(fds->second);
  }
  return 0;
}

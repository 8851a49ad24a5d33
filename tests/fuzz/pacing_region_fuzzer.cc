// Fuzzes the pacing regions as the daemon and a peer shim read them: a tenant's lanes page
// (common/pacing_region.h) is that tenant's to write, so every word of it is fuzzed. Per input,
// a PacingDomain (daemon/pacing_domain.h) is created, tenants join as LS or BE, map their pages
// and seal them (or not), and the input is a series of operations, one byte each plus its
// arguments: a tenant writes any 8-byte word of its page with any value, the daemon publishes
// sealed pages and reports every tenant's figures, a tenant leaves, joins again or changes
// class, and a BE reader takes the pages through ReadLanes at any clock reading and feeds them
// to the pure pacing decisions (pacing/pacing.h) as the shim does. Nothing may crash, hang or
// overflow, and every figure that comes out must be within the bounds ReadLanes promises.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "daemon/pacing_domain.h"
#include "fuzz_daemon.h"
#include "missile/common/pacing_region.h"
#include "missile/common/shm_region.h"
#include "missile/pacing/pacing.h"

namespace missile::daemon::fuzz {
namespace {

using pacingreg::LanesPage;
using pacingreg::LanesView;

constexpr int kTenants = 4;

struct Tenant {
  uint64_t session = 0;
  TenantClass cls = TenantClass::kBestEffort;
  shm::ShmRegion lanes;
  LanesPage* page() const { return static_cast<LanesPage*>(lanes.data()); }
};

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz: broken bound: %s\n", what);
    abort();
  }
}

void Join(PacingDomain* d, Tenant* t, bool seal) {
  auto fds = d->Join(t->session, 1000 + static_cast<int>(t->session), t->cls, 1);
  if (!fds.ok()) return;
  close(fds->directory);
  auto lanes =
      shm::ShmRegion::Attach(fds->lanes, sizeof(LanesPage), shm::Access::kReadWrite);
  if (!lanes.ok()) return;  // sealed by an earlier join of the same session: read-only now
  t->lanes = *std::move(lanes);
  pacingreg::InitLanes(t->page());
  if (seal) t->lanes.SealWrites().IgnoreError();
}

void CheckView(const LanesView& v, uint64_t now) {
  Check(v.last_submit_ns <= now, "last submission in the future");
  Check(v.gpu_ns <= pacingreg::kMaxGpuNs, "gpu_ns");
  Check(v.running_until_ns <= now + pacingreg::kMaxRunAheadNs, "running_until_ns");
  Check(v.inflight <= pacingreg::kMaxInflight, "inflight");
}

// What a BE shim does with its peers' pages at `now` (libintercept/pacer.cc).
void ReadAsPeer(const Tenant* tenants, uint64_t now, pacing::LsBusyTracker* tracker) {
  pacing::LsObservation seen;
  std::vector<pacing::ShareEntry> peers;
  for (int i = 0; i < kTenants; ++i) {
    if (!tenants[i].lanes.valid()) continue;
    const LanesView v = pacingreg::ReadLanes(*tenants[i].page(), now);
    CheckView(v, now);
    if (tenants[i].cls == TenantClass::kLatencySensitive) {
      if (v.last_submit_ns == 0) continue;
      seen.newest_submit_ns = std::max(seen.newest_submit_ns, v.last_submit_ns);
      seen.in_flight = seen.in_flight ||
                       pacing::LsInFlightCounts(v.in_flight, v.last_submit_ns, now, 200'000'000);
    } else {
      peers.push_back({v.gpu_ns, 1, v.in_flight && now < v.running_until_ns});
    }
  }
  tracker->Busy(seen, now, 200'000);
  const pacing::ShareEntry self{peers.empty() ? 0 : peers.front().gpu_ns, 3};
  pacing::ShareAllows(self, peers, 2'000'000);
  Check(pacing::CatchUp(self, peers, 2'000'000) >= self.gpu_ns, "CatchUp went back");
}

}  // namespace
}  // namespace missile::daemon::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace missile::daemon;
  using namespace missile::daemon::fuzz;
  using missile::TenantClass;
  namespace pacing = missile::pacing;
  namespace pacingreg = missile::pacingreg;
  static auto domain = PacingDomain::Create({});
  if (!domain.ok()) abort();
  PacingDomain* d = domain->get();
  Bytes in(data, size);
  Tenant tenants[kTenants];
  static uint64_t next_session = 1;
  for (int i = 0; i < kTenants; ++i) {
    tenants[i].session = next_session++;
    tenants[i].cls = i % 2 == 0 ? TenantClass::kLatencySensitive : TenantClass::kBestEffort;
    Join(d, &tenants[i], /*seal=*/i != 3);
  }
  pacing::LsBusyTracker tracker;
  int ops = 0;
  while (!in.empty() && ops++ < 256) {
    const uint8_t op = in.Get<uint8_t>();
    Tenant& t = tenants[in.Get<uint8_t>() % kTenants];
    switch (op % 6) {
      case 0: {  // the tenant writes any word of its page
        const uint16_t word = in.Get<uint16_t>() % (sizeof(LanesPage) / 8);
        const uint64_t value = in.Get<uint64_t>();
        if (t.lanes.valid()) {
          reinterpret_cast<volatile uint64_t*>(t.page())[word] = value;
        }
        break;
      }
      case 1:
        d->PublishSealed();
        break;
      case 2:
        for (const Tenant& each : tenants) {
          if (std::optional<PacingStats> st = d->Stats(each.session)) {
            Check(st->inflight <= pacingreg::kMaxInflight, "stats inflight");
            Check(st->gpu_ns <= pacingreg::kMaxGpuNs, "stats gpu_ns");
            Check(st->busy_share >= 0 && st->busy_share <= 1, "busy share");
            Check(st->held_share >= 0 && st->held_share <= 1, "held share");
          }
        }
        break;
      case 3: {  // a reader at any clock reading, near the real one or not
        const uint64_t now = in.Get<uint8_t>() % 2 == 0 ? pacingreg::NowNs() : in.Get<uint64_t>();
        ReadAsPeer(tenants, now, &tracker);
        break;
      }
      case 4:  // leave and join again: a fresh page
        d->Leave(t.session);
        t.lanes = missile::shm::ShmRegion();
        t.session = next_session++;
        Join(d, &t, in.Get<uint8_t>() % 2 == 0);
        break;
      case 5:
        t.cls = in.Get<uint8_t>() % 2 == 0 ? TenantClass::kLatencySensitive
                                           : TenantClass::kBestEffort;
        d->SetPolicy(t.session, t.cls, in.Get<uint8_t>());
        break;
    }
  }
  for (Tenant& t : tenants) d->Leave(t.session);
  return 0;
}

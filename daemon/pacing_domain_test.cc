#include "pacing_domain.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace missile::daemon {
namespace {

constexpr TenantClass kLs = TenantClass::kLatencySensitive;
constexpr TenantClass kBe = TenantClass::kBestEffort;

// The tenant's view of what Join returned: the directory (read-only) and its own lanes page
// (writable, then sealed as the shim seals it).
struct TenantView {
  shm::ShmRegion directory;
  shm::ShmRegion lanes;
  const pacingreg::Directory* dir() const {
    return static_cast<const pacingreg::Directory*>(directory.data());
  }
  pacingreg::LanesPage* page() const { return static_cast<pacingreg::LanesPage*>(lanes.data()); }
};

std::optional<TenantView> MapTenant(absl::StatusOr<PacingDomain::Descriptors> fds,
                                    bool seal = true) {
  if (!fds.ok()) return std::nullopt;
  auto dir = shm::ShmRegion::Attach(fds->directory, sizeof(pacingreg::Directory),
                                    shm::Access::kReadOnly);
  auto lanes = shm::ShmRegion::Attach(fds->lanes, sizeof(pacingreg::LanesPage),
                                      shm::Access::kReadWrite);
  if (!dir.ok() || !lanes.ok()) return std::nullopt;
  TenantView v{*std::move(dir), *std::move(lanes)};
  pacingreg::InitLanes(v.page());
  if (seal && !v.lanes.SealWrites().ok()) return std::nullopt;
  return v;
}

void CloseBoth(const absl::StatusOr<PacingDomain::Descriptors>& fds) {
  if (!fds.ok()) return;
  close(fds->directory);
  close(fds->lanes);
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// What a tenant can do to a descriptor it was handed: none of it may change the file.
void ExpectCannotChange(int fd, const char* what) {
  SCOPED_TRACE(what);
  struct stat before;
  ASSERT_EQ(fstat(fd, &before), 0);
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_NE(ftruncate(fd, before.st_size * 2), 0);
  EXPECT_EQ(mmap(nullptr, before.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  const char byte = 1;
  EXPECT_NE(pwrite(fd, &byte, 1, 0), 1);
  EXPECT_NE(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  // Nor through a new open of the same file.
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const int again = open(path.c_str(), O_RDWR);
  if (again >= 0) {
    EXPECT_EQ(mmap(nullptr, before.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0),
              MAP_FAILED);
    EXPECT_NE(ftruncate(again, 0), 0);
    close(again);
  }
  struct stat after;
  ASSERT_EQ(fstat(fd, &after), 0);
  EXPECT_EQ(after.st_size, before.st_size);
}

TEST(PacingDomain, PublishesThePolicyAndChangesIt) {
  PacingSettings s;
  s.window_items = 3;
  s.window_ns = 77'000;
  auto d = PacingDomain::Create(s);
  ASSERT_TRUE(d.ok()) << d.status();
  std::optional<TenantView> t = MapTenant((*d)->Join(11, 1234, kBe, 4));
  ASSERT_TRUE(t.has_value());
  const pacingreg::Directory* r = t->dir();
  EXPECT_EQ(r->magic, pacingreg::kMagic);
  EXPECT_EQ(r->version, pacingreg::kVersion);
  EXPECT_EQ(r->policy.window_items.load(), 3u);
  EXPECT_EQ(r->policy.window_ns.load(), 77'000u);
  EXPECT_EQ(r->policy.pacing.load(), 1u);
  const uint64_t gen = r->policy.generation.load();
  s.pacing = false;
  (*d)->Configure(s);
  EXPECT_EQ(r->policy.pacing.load(), 0u);
  EXPECT_GT(r->policy.generation.load(), gen);
  EXPECT_EQ((*d)->settings(), s);
}

// The attack of the audit: a tenant truncated the one region every tenant of the GPU shared,
// and missiled and every tenant died of SIGBUS; or it wrote the policy (max_hold 0, pacing 0)
// for everyone. Every descriptor a tenant gets now is of a file it cannot resize, and the
// directory cannot be written through any of them.
TEST(PacingDomain, NoDescriptorATenantGetsCanResizeOrRewriteWhatOthersRead) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  auto fds = (*d)->Join(1, 100, kBe, 1);
  ASSERT_TRUE(fds.ok());
  ExpectCannotChange(fds->directory, "directory");
  // The tenant's own page: writable by it (once), never resizable.
  EXPECT_NE(ftruncate(fds->lanes, 0), 0);
  std::optional<TenantView> t = MapTenant(fds);
  ASSERT_TRUE(t.has_value());
  // Once sealed, its descriptor gives nobody else a writable mapping; its own stays writable.
  ExpectCannotChange(t->lanes.fd(), "own lanes after the seal");
  t->page()->submissions.store(5);
  // A peer's descriptor of it, as a BE reader gets it.
  std::optional<TenantView> reader = MapTenant((*d)->Join(2, 200, kBe, 1));
  ASSERT_TRUE(reader.has_value());
  (*d)->PublishSealed();
  const uint32_t slot = *(*d)->SlotOf(1);
  const uint64_t epoch = reader->dir()->entries[slot].lanes_epoch.load();
  ASSERT_NE(epoch, 0u);
  auto peer = (*d)->OpenPeerLanes(2, slot, epoch);
  ASSERT_TRUE(peer.ok()) << peer.status();
  ExpectCannotChange(*peer, "a peer's lanes");
  close(*peer);
  // The daemon reads on, unharmed.
  EXPECT_EQ((*d)->Stats(1)->submissions, 5u);
  EXPECT_EQ(reader->dir()->policy.pacing.load(), 1u);
}

TEST(PacingDomain, LanesArePublishedOnlyOnceSealedAndOnlyToBeReaders) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  std::optional<TenantView> ls = MapTenant((*d)->Join(1, 100, kLs, 1), /*seal=*/false);
  std::optional<TenantView> be = MapTenant((*d)->Join(2, 200, kBe, 1));
  ASSERT_TRUE(ls.has_value() && be.has_value());
  const uint32_t ls_slot = *(*d)->SlotOf(1);
  const uint32_t be_slot = *(*d)->SlotOf(2);
  (*d)->PublishSealed();
  // Unsealed: its tenant could still hand out writable mappings, so no reader gets it.
  EXPECT_EQ(be->dir()->entries[ls_slot].lanes_epoch.load(), 0u);
  EXPECT_FALSE((*d)->Stats(1)->lanes);
  const uint64_t members = be->dir()->policy.members.load();
  ASSERT_TRUE(ls->lanes.SealWrites().ok());
  (*d)->PublishSealed();
  const uint64_t epoch = be->dir()->entries[ls_slot].lanes_epoch.load();
  EXPECT_NE(epoch, 0u);
  EXPECT_GT(be->dir()->policy.members.load(), members);
  EXPECT_TRUE((*d)->Stats(1)->lanes);
  // A BE reads the LS's page; an LS reads nobody's; a stale epoch or slot is refused.
  auto ok = (*d)->OpenPeerLanes(2, ls_slot, epoch);
  ASSERT_TRUE(ok.ok()) << ok.status();
  close(*ok);
  const uint64_t be_epoch = be->dir()->entries[be_slot].lanes_epoch.load();
  EXPECT_EQ((*d)->OpenPeerLanes(1, be_slot, be_epoch).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*d)->OpenPeerLanes(2, ls_slot, epoch + 1000).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*d)->OpenPeerLanes(2, pacingreg::kSlots, epoch).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*d)->OpenPeerLanes(99, ls_slot, epoch).status().code(), absl::StatusCode::kNotFound);
}

TEST(PacingDomain, SlotsPerSessionWithClassWeightAndLsCount) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  std::optional<TenantView> a = MapTenant((*d)->Join(1, 100, kLs, 10));
  CloseBoth((*d)->Join(2, 200, kBe, 0));
  ASSERT_TRUE(a.has_value());
  const pacingreg::Directory* r = a->dir();
  auto sa = (*d)->SlotOf(1);
  auto sb = (*d)->SlotOf(2);
  ASSERT_TRUE(sa && sb);
  EXPECT_NE(*sa, *sb);
  EXPECT_EQ(r->entries[*sa].session.load(), 1u);
  EXPECT_EQ(r->entries[*sa].cls.load(), pacingreg::kLs);
  EXPECT_EQ(r->entries[*sa].pid.load(), 100);
  EXPECT_EQ(r->entries[*sb].cls.load(), pacingreg::kBe);
  EXPECT_EQ(r->entries[*sb].weight.load(), 1u);  // 0 is read as 1
  EXPECT_EQ(r->policy.ls_tenants.load(), 1u);
  EXPECT_EQ(r->policy.be_tenants.load(), 1u);
  // Joining again (a shim that registered again) keeps the slot with a new page, writable
  // although the first one was sealed; the first is no longer published.
  (*d)->PublishSealed();
  const uint64_t first_epoch = r->entries[*sa].lanes_epoch.load();
  EXPECT_NE(first_epoch, 0u);
  std::optional<TenantView> again = MapTenant((*d)->Join(1, 100, kLs, 10));
  ASSERT_TRUE(again.has_value());
  struct stat first, second;
  ASSERT_EQ(fstat(a->lanes.fd(), &first), 0);
  ASSERT_EQ(fstat(again->lanes.fd(), &second), 0);
  EXPECT_NE(first.st_ino, second.st_ino);
  EXPECT_EQ((*d)->SlotOf(1), sa);
  (*d)->PublishSealed();
  EXPECT_NE(r->entries[*sa].lanes_epoch.load(), 0u);
  EXPECT_NE(r->entries[*sa].lanes_epoch.load(), first_epoch);
  // A class change reaches the entry and the LS count.
  (*d)->SetPolicy(2, kLs, 7);
  EXPECT_EQ(r->entries[*sb].cls.load(), pacingreg::kLs);
  EXPECT_EQ(r->entries[*sb].weight.load(), 7u);
  EXPECT_EQ(r->policy.ls_tenants.load(), 2u);
  EXPECT_EQ(r->policy.be_tenants.load(), 0u);
}

TEST(PacingDomain, LeaveMakesADeadLsIdleAtOnceAndTheNextSessionGetsAFreshPage) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  std::optional<TenantView> t = MapTenant((*d)->Join(5, 1, kLs, 1));
  ASSERT_TRUE(t.has_value());
  (*d)->PublishSealed();
  const uint32_t slot = *(*d)->SlotOf(5);
  // The tenant marks work that never completes (it was killed mid-request).
  t->page()->lanes_used.store(2);
  t->page()->lanes[1].submitted.store(42);
  t->page()->lanes[1].completed.store(40);
  auto st = (*d)->Stats(5);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->busy);
  EXPECT_TRUE(st->ls);
  (*d)->Leave(5);
  EXPECT_EQ(t->dir()->entries[slot].lanes_epoch.load(), 0u);
  EXPECT_EQ(t->dir()->entries[slot].session.load(), 0u);
  EXPECT_EQ(t->dir()->entries[slot].cls.load(), pacingreg::kFree);
  EXPECT_EQ(t->dir()->policy.ls_tenants.load(), 0u);
  EXPECT_FALSE((*d)->Stats(5).has_value());
  (*d)->Leave(5);  // twice: nothing
  // The slot is reused with a page of its own: what the old tenant (still alive, still
  // holding its writable mapping) writes reaches nobody.
  std::optional<TenantView> next = MapTenant((*d)->Join(6, 2, kLs, 1));
  ASSERT_TRUE(next.has_value());
  (*d)->PublishSealed();
  EXPECT_EQ(*(*d)->SlotOf(6), slot);
  EXPECT_EQ(next->page()->lanes[1].submitted.load(), 0u);
  t->page()->lanes[1].submitted.store(43);
  EXPECT_FALSE((*d)->Stats(6)->busy);
  EXPECT_NE(next->dir()->entries[slot].lanes_epoch.load(), 0u);
}

TEST(PacingDomain, SummaryCountsTheClassesAndSeesABusyLs) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  PacingSummary sum = (*d)->Summary();
  EXPECT_EQ(sum.ls_tenants, 0u);
  EXPECT_EQ(sum.be_tenants, 0u);
  EXPECT_FALSE(sum.ls_busy);
  std::optional<TenantView> ls = MapTenant((*d)->Join(1, 100, kLs, 1));
  ASSERT_TRUE(ls.has_value());
  CloseBoth((*d)->Join(2, 200, kBe, 0));
  CloseBoth((*d)->Join(3, 300, kBe, 0));
  (*d)->PublishSealed();
  sum = (*d)->Summary();
  EXPECT_EQ(sum.ls_tenants, 1u);
  EXPECT_EQ(sum.be_tenants, 2u);
  EXPECT_FALSE(sum.ls_busy);  // nothing in flight
  ls->page()->lanes_used.store(2);
  ls->page()->lanes[1].submitted.store(42);
  ls->page()->lanes[1].completed.store(40);
  EXPECT_TRUE((*d)->Summary().ls_busy);
  (*d)->Leave(1);
  sum = (*d)->Summary();
  EXPECT_EQ(sum.ls_tenants, 0u);
  EXPECT_EQ(sum.be_tenants, 2u);
  EXPECT_FALSE(sum.ls_busy);
}

// The audit's attack: 64 plain registrations took every slot, and later LS tenants went
// unprotected. BE sessions stop short of the LS reserve.
TEST(PacingDomain, BeSessionsCannotTakeTheSlotsKeptForLs) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  const uint64_t be_slots = pacingreg::kSlots - PacingDomain::kLsReservedSlots;
  for (uint64_t s = 1; s <= be_slots; ++s) {
    auto fds = (*d)->Join(s, 1, kBe, 1);
    ASSERT_TRUE(fds.ok());
    CloseBoth(fds);
  }
  EXPECT_EQ((*d)->Join(1000, 1, kBe, 1).status().code(), absl::StatusCode::kResourceExhausted);
  // The LS tenants still find slots, up to the last one.
  for (uint64_t s = 2000; s < 2000 + PacingDomain::kLsReservedSlots; ++s) {
    auto fds = (*d)->Join(s, 1, kLs, 1);
    ASSERT_TRUE(fds.ok()) << s;
    CloseBoth(fds);
  }
  auto full = (*d)->Join(3000, 1, kLs, 1);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*d)->Join(0, 1, kBe, 1).status().code(), absl::StatusCode::kInvalidArgument);
  (*d)->Leave(3);
  auto fds = (*d)->Join(1000, 1, kBe, 1);
  ASSERT_TRUE(fds.ok());
  CloseBoth(fds);
}

// A tenant's page says what the tenant likes; what the daemon shows of it is bounded.
TEST(PacingDomain, FiguresFromALyingTenantAreBounded) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  std::optional<TenantView> t = MapTenant((*d)->Join(4, 1, kBe, 1));
  ASSERT_TRUE(t.has_value());
  (*d)->PublishSealed();
  pacingreg::LanesPage* p = t->page();
  p->lanes_used.store(UINT32_MAX);  // past the lanes: read as kLanes
  p->held_ns.store(UINT64_MAX);
  p->hold_since_ns.store(UINT64_MAX);  // a hold that began in the future: none
  p->inflight.store(UINT64_MAX);
  p->gpu_ns.store(UINT64_MAX);
  std::optional<PacingStats> st = (*d)->Stats(4);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->held_ns, pacingreg::kMaxGpuNs);
  EXPECT_EQ(st->inflight, pacingreg::kMaxInflight);
  EXPECT_EQ(st->gpu_ns, pacingreg::kMaxGpuNs);
  SleepMs(30);
  st = (*d)->Stats(4);
  ASSERT_TRUE(st.has_value());
  EXPECT_LE(st->held_share, 1.0);
  EXPECT_GE(st->held_share, 0.0);
}

// The sampler's share of a session, once it is above 0 (at most 2 s later); 0 if it never is.
double ShareOnceAboveZero(const PacingDomain& d, uint64_t session, TenantClass cls) {
  for (int i = 0; i < 200; ++i) {
    std::optional<PacingStats> st = d.Stats(session);
    if (!st.has_value()) return 0;
    const double share = cls == kLs ? st->busy_share : st->held_share;
    if (share > 0) return share;
    SleepMs(10);
  }
  return 0;
}

TEST(PacingDomain, SamplerMeasuresHowBusyAnLsWas) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  std::optional<TenantView> t = MapTenant((*d)->Join(7, 1, kLs, 1));
  ASSERT_TRUE(t.has_value());
  pacingreg::LanesPage& slot = *t->page();
  SleepMs(20);
  EXPECT_EQ((*d)->Stats(7)->busy_share, 0.0);  // nothing in flight yet
  EXPECT_TRUE((*d)->Stats(7)->lanes);          // the sampler published the sealed page
  // Work in flight on lane 2 for about 50 ms.
  slot.lanes_used.store(3);
  slot.lanes[2].submitted.store(5);
  SleepMs(50);
  const double busy = ShareOnceAboveZero(**d, 7, kLs);
  EXPECT_GT(busy, 0.0);
  EXPECT_LT(busy, 0.5);  // 50 ms of about a second, however late the samples came
  EXPECT_EQ((*d)->Stats(7)->held_share, 0.0);  // an LS is never held
  // Done: the share decays.
  slot.lanes[2].completed.store(5);
  SleepMs(20);
  const double after = (*d)->Stats(7)->busy_share;
  SleepMs(100);
  const double later = (*d)->Stats(7)->busy_share;
  EXPECT_GT(after, 0.0);
  EXPECT_LT(later, after);
}

// The time in flight, per tenant and for the GPU by class: counted while work is in flight,
// not after.
TEST(PacingDomain, SamplerCountsTimeInFlightPerTenantAndPerGpu) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  std::optional<TenantView> ls = MapTenant((*d)->Join(7, 1, kLs, 1));
  std::optional<TenantView> be = MapTenant((*d)->Join(8, 2, kBe, 1));
  ASSERT_TRUE(ls.has_value() && be.has_value());
  SleepMs(20);
  EXPECT_EQ((*d)->Stats(7)->busy_ns, 0u);
  EXPECT_EQ((*d)->Summary().ls_busy_ns, 0u);
  pacingreg::LanesPage& page = *ls->page();
  page.lanes_used.store(1);
  page.lanes[0].submitted.store(1);
  SleepMs(60);
  page.lanes[0].completed.store(1);
  SleepMs(20);
  const uint64_t busy = (*d)->Stats(7)->busy_ns;
  const PacingSummary sum = (*d)->Summary();
  // About 60 ms; the sampler may wake late on a loaded machine, never early.
  EXPECT_GE(busy, 40'000'000u);
  EXPECT_LT(busy, 200'000'000u);
  EXPECT_EQ(sum.ls_busy_ns, busy);  // the one LS
  EXPECT_GT(sum.ls_busy_share, 0.0);
  EXPECT_LT(sum.ls_busy_share, 0.5);
  EXPECT_EQ(sum.be_busy_ns, 0u);  // the BE had nothing in flight
  EXPECT_EQ(sum.be_busy_share, 0.0);
  EXPECT_EQ((*d)->Stats(8)->busy_ns, 0u);
  SleepMs(30);
  EXPECT_EQ((*d)->Stats(7)->busy_ns, busy);  // done: no more counted
}

TEST(PacingDomain, SamplerMeasuresHowLongABeWasHeld) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  std::optional<TenantView> t = MapTenant((*d)->Join(8, 1, kBe, 1));
  ASSERT_TRUE(t.has_value());
  (*d)->PublishSealed();
  pacingreg::LanesPage& slot = *t->page();
  // The tenant adds 30 ms of holds; its lanes say busy, which does not count for a BE.
  slot.lanes_used.store(1);
  slot.lanes[0].submitted.store(1);
  slot.held_ns.store(30'000'000);
  slot.held_count.store(3);
  const double held = ShareOnceAboveZero(**d, 8, kBe);
  EXPECT_GT(held, 0.0);
  SleepMs(50);  // the 30 ms are counted by now
  std::optional<PacingStats> st = (*d)->Stats(8);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->busy_share, 0.0);
  EXPECT_EQ(st->held_ns, 30'000'000u);
  EXPECT_EQ(st->held_count, 3u);
  const double counted = st->held_share;
  EXPECT_GT(counted, 0.0);
  EXPECT_LT(counted, 0.1);  // 30 ms of about a second (1 - e^-0.03), never more than elapsed
  SleepMs(100);
  EXPECT_LT((*d)->Stats(8)->held_share, counted);  // no more holds: decaying
  // A hold going on counts before it ends.
  slot.hold_since_ns.store(pacingreg::NowNs());
  SleepMs(30);
  EXPECT_GE((*d)->Stats(8)->held_ns, 30'000'000u + 20'000'000u);
  // Leaving and joining again starts the slot's estimate afresh.
  (*d)->Leave(8);
  CloseBoth((*d)->Join(9, 1, kBe, 1));
  EXPECT_EQ((*d)->Stats(9)->held_share, 0.0);
}

TEST(PacingDomain, ApplyPacingChangeChecksEveryFieldFirst) {
  PacingSettings before;
  PacingChange change;
  change.pacing = false;
  change.window_us = 300;
  change.max_hold_ms = 5;
  absl::StatusOr<PacingSettings> after = ApplyPacingChange(before, change);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->pacing);
  EXPECT_EQ(after->window_ns, 300'000u);
  EXPECT_EQ(after->max_hold_ns, 5'000'000u);
  EXPECT_EQ(after->window_items, before.window_items);
  EXPECT_EQ(after->ls_stale_ns, before.ls_stale_ns);
  EXPECT_EQ(DescribePacingChange(before, *after),
            "pacing on -> off, window_us 100 -> 300, max_hold_ms 20 -> 5");
  EXPECT_EQ(DescribePacingChange(before, before), "unchanged");

  struct Bad {
    PacingChange change;
    const char* message;
  };
  auto with = [](auto set) {
    PacingChange c;
    c.window_us = 1;  // valid: a bad field elsewhere still changes nothing
    set(c);
    return c;
  };
  for (const Bad& bad : std::vector<Bad>{
           {with([](PacingChange& c) { c.window_items = 0; }),
            "window_items must be in [1, 1024], got 0"},
           {with([](PacingChange& c) { c.window_items = 1025; }), "window_items must be in"},
           {with([](PacingChange& c) { c.window_us = 5'000'000; }),
            "window_us must be in [0, 1000000], got 5000000"},
           {with([](PacingChange& c) { c.ls_idle_us = 1'000'001; }), "ls_idle_us must be in"},
           {with([](PacingChange& c) { c.ls_stale_ms = 0; }), "ls_stale_ms must be in [1, 600000]"},
           {with([](PacingChange& c) { c.max_hold_ms = 600'001; }), "max_hold_ms must be in"},
           {with([](PacingChange& c) { c.unknown_us = 1'000'001; }), "unknown_us must be in"},
           {with([](PacingChange& c) { c.share_slack_us = 1'000'001; }),
            "share_slack_us must be in"},
           {with([](PacingChange& c) { c.ls_reserve_tpcs = 128; }),
            "ls_reserve_tpcs must be in [0, 127], got 128"}}) {
    absl::StatusOr<PacingSettings> r = ApplyPacingChange(before, bad.change);
    ASSERT_FALSE(r.ok()) << bad.message;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(bad.message), std::string::npos) << r.status();
  }
  // The edges of every range are accepted.
  PacingChange edges;
  edges.window_items = 1024;
  edges.window_us = 0;
  edges.ls_idle_us = 1'000'000;
  edges.ls_stale_ms = 1;
  edges.max_hold_ms = 600'000;
  edges.unknown_us = 0;
  edges.share_slack_us = 1'000'000;
  edges.ls_reserve_tpcs = 127;
  absl::StatusOr<PacingSettings> edged = ApplyPacingChange(before, edges);
  ASSERT_TRUE(edged.ok());
  EXPECT_EQ(edged->ls_reserve_tpcs, 127u);
  EXPECT_NE(DescribePacingChange(before, *edged).find("ls_reserve_tpcs 0 -> 127"),
            std::string::npos);
}

}  // namespace
}  // namespace missile::daemon

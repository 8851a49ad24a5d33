// Multi-process tests of missiled (see daemon_process_fixture.h). Tenants' memory through the daemon: quotas per tenant, memory back from a killed tenant,
// scrubbing, small-allocation carving, the shim's reuse cache, VMM and stream-ordered memory,
// and colour placement.
#include "daemon_process_fixture.h"
#include "missile/colorer/profile.h"

namespace missile::process_test {
namespace {

TEST_F(DaemonTest, TwoTenantsShareNothingAndEachSeesItsOwnQuota) {
  StartDaemon("[classes.be]\ntenant_quota = \"64MiB\"\n[classes.ls]\ntenant_quota = \"128MiB\"\n");
  Child be, ls;
  auto be_env = TenantEnv("be", "batch");
  be_env["MISSILE_BLOCKS"] = "chunks";  // one 2 MiB block per granule; the LS tenant: one block
  ASSERT_TRUE(be.Start({TENANT_PROBE, "info", "alloc:16", "hold", "check"}, be_env));
  ASSERT_EQ(be.WaitForLine("ready"), "ready");
  ASSERT_TRUE(ls.Start({TENANT_PROBE, "info", "alloc:16", "hold", "check"}, TenantEnv("ls", "web")));
  ASSERT_EQ(ls.WaitForLine("ready"), "ready");
  EXPECT_NE(be.out().find("total=67108864 devtotal=67108864"), std::string::npos) << be.out();
  EXPECT_NE(ls.out().find("total=134217728 devtotal=134217728"), std::string::npos) << ls.out();
  std::set<std::string> be_phys = PhysOf(be.out()), ls_phys = PhysOf(ls.out());
  ASSERT_EQ(be_phys.size(), 8u) << be.out();
  ASSERT_EQ(ls_phys.size(), 8u) << ls.out();
  for (const auto& p : be_phys) EXPECT_EQ(ls_phys.count(p), 0u) << "shared block at " << p;
  EXPECT_EQ(Leased(), 32 * kMiB);
  be.CloseStdin();
  ls.CloseStdin();
  EXPECT_EQ(be.Wait(), 0);
  EXPECT_EQ(ls.Wait(), 0);
  EXPECT_NE(be.out().find("check ok"), std::string::npos) << be.out();
  EXPECT_NE(ls.out().find("check ok"), std::string::npos) << ls.out();
}

TEST_F(DaemonTest, OverQuotaFailsCleanlyInOneTenantOnly) {
  StartDaemon("[classes.be]\ntenant_quota = \"64MiB\"\n");
  Child greedy, other;
  ASSERT_TRUE(greedy.Start({TENANT_PROBE, "alloc:48", "alloc:32", "check", "hold"},
                           TenantEnv("be", "greedy")));
  ASSERT_EQ(greedy.WaitForLine("ready"), "ready");
  EXPECT_NE(greedy.out().find("alloc 48 ok"), std::string::npos) << greedy.out();
  EXPECT_NE(greedy.out().find("alloc 32 err 2"), std::string::npos) << greedy.out();  // OOM
  EXPECT_NE(greedy.out().find("check ok"), std::string::npos) << greedy.out();
  ASSERT_TRUE(other.Start({TENANT_PROBE, "alloc:48", "check"}, TenantEnv("be", "other")));
  EXPECT_EQ(other.Wait(), 0);
  EXPECT_NE(other.out().find("alloc 48 ok"), std::string::npos) << other.out();
  EXPECT_NE(other.out().find("check ok"), std::string::npos) << other.out();
  greedy.CloseStdin();
  EXPECT_EQ(greedy.Wait(), 0);
}

TEST_F(DaemonTest, KilledTenantReturnsEverythingWithinASecond) {
  StartDaemon();
  Child victim;
  ASSERT_TRUE(victim.Start({TENANT_PROBE, "alloc:32", "small:20", "vmm:4", "loop:8:3", "hold"},
                           TenantEnv("be", "victim")));
  ASSERT_EQ(victim.WaitForLine("ready"), "ready");
  // 32 MiB, one block carved for the small allocations, the 4 MiB VMM block (released by the
  // program, but frees go back to the daemon in batches, so it is still held) and the 8 MiB the
  // loop freed, kept mapped by the shim for reuse.
  ASSERT_EQ(Leased(), 46 * kMiB);
  ASSERT_EQ(Status().tenants(), 1u);
  auto killed = std::chrono::steady_clock::now();
  victim.Kill(SIGKILL);
  victim.Wait();
  uint64_t leased = ~0ull;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(3)) {
    leased = Leased();
    if (leased == 0 && Status().tenants() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(leased, 0u);
  EXPECT_LT(seconds, 1.0);
  // The blocks are usable by the next tenant.
  Child next;
  ASSERT_TRUE(next.Start({TENANT_PROBE, "alloc:32", "check"}, TenantEnv("be", "next")));
  EXPECT_EQ(next.Wait(), 0);
  EXPECT_NE(next.out().find("check ok"), std::string::npos) << next.out();
}

// A block one tenant wrote and gave back never reaches the next tenant: it was handed out, so
// the daemon scrubs and destroys it, and the next tenant gets fresh memory that reads zero.
TEST_F(DaemonTest, ReturnedBlocksNeverReachTheNextTenant) {
  StartDaemon();
  Child first;
  ASSERT_TRUE(first.Start({TENANT_PROBE, "alloc:16", "freeall", "info"}, TenantEnv("be", "first")));
  EXPECT_EQ(first.Wait(), 0);
  ASSERT_NE(first.out().find("alloc 16 ok"), std::string::npos) << first.out();
  ASSERT_EQ(PhysOf(first.out()).size(), 8u) << first.out();
  ASSERT_EQ(LeasedWithin3s(0), 0u);
  EXPECT_EQ(Status().pools(0).cached_bytes(), 0u) << "a handed-out block was cached";
  Child next;
  ASSERT_TRUE(next.Start({TENANT_PROBE, "zero:16"}, TenantEnv("be", "next")));
  EXPECT_EQ(next.Wait(), 0);
  EXPECT_NE(next.out().find("zero 16 yes"), std::string::npos) << next.out();
}

TEST_F(DaemonTest, SmallAllocationsAreCarvedFromHeldBlocks) {
  StartDaemon();
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "small:200", "hold"}, TenantEnv("ls")));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  EXPECT_NE(t.out().find("small 200 ok"), std::string::npos) << t.out();
  EXPECT_EQ(Leased(), 2 * kMiB);  // 200 x 4 KiB fit in one block: one round trip, not 200
  t.CloseStdin();
  EXPECT_EQ(t.Wait(), 0);
}

// An allocate-free loop of one size is served from the range the first allocation mapped: the
// shim imports its blocks once, and the daemon leases them once, whichever shape backs it. The
// freed range stays leased (counted against the tenant) until a capacity query returns it.
TEST_F(DaemonTest, AllocFreeLoopReusesTheFreedRange) {
  StartDaemon();
  for (const auto& [blocks, imports] : {std::pair{"single", 1}, std::pair{"chunks", 8}}) {
    SCOPED_TRACE(blocks);
    auto env = TenantEnv("ls", std::string("loop-") + blocks);
    env["MISSILE_BLOCKS"] = blocks;
    Child t;
    ASSERT_TRUE(t.Start({TENANT_PROBE, "loop:16:40", "hold"}, env));
    ASSERT_EQ(t.WaitForLine("ready"), "ready");
    EXPECT_NE(t.out().find("loop 16 40 ok imports=" + std::to_string(imports) + "\n"),
              std::string::npos) << t.out();
    EXPECT_EQ(Leased(), 16 * kMiB);  // the one range, cached
    t.CloseStdin();
    EXPECT_EQ(t.Wait(), 0);
    ASSERT_EQ(LeasedWithin3s(0), 0u);

    // cuMemGetInfo returns the cached range: the daemon's numbers are those of a tenant that
    // kept nothing.
    Child q;
    ASSERT_TRUE(q.Start({TENANT_PROBE, "loop:16:40", "info", "hold"}, env));
    ASSERT_EQ(q.WaitForLine("ready"), "ready");
    EXPECT_EQ(Leased(), 0u);
    size_t pos = q.out().find("info free=");
    ASSERT_NE(pos, std::string::npos) << q.out();
    uint64_t free_bytes = strtoull(q.out().c_str() + pos + 10, nullptr, 10);
    pos = q.out().find("total=", pos);
    uint64_t total_bytes = strtoull(q.out().c_str() + pos + 6, nullptr, 10);
    EXPECT_EQ(free_bytes, total_bytes) << q.out();
    q.CloseStdin();
    EXPECT_EQ(q.Wait(), 0);
    ASSERT_EQ(LeasedWithin3s(0), 0u);
  }
}

// The chunks the small-allocation carver gives back are reused like any freed range of their
// size (one granule).
TEST_F(DaemonTest, ChunksTheSmallAllocatorReleasesAreReused) {
  StartDaemon();
  Child t;
  // 1100 x 4 KiB fill three 2 MiB chunks; once freed, one stays with the carver and two are
  // cached, so the loop imports nothing.
  ASSERT_TRUE(t.Start({TENANT_PROBE, "small:1100", "freeall", "loop:2:10", "small:1", "check"},
                      TenantEnv("ls")));
  EXPECT_EQ(t.Wait(), 0);
  EXPECT_NE(t.out().find("small 1100 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("loop 2 10 ok imports=0\n"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("check ok"), std::string::npos) << t.out();
}

// The cache keeps at most 32 ranges and at most an eighth of the quota asked for (here 256 MiB:
// 32 MiB); past either, the oldest go back to the daemon and the next allocations of their size
// import again.
TEST_F(DaemonTest, ReuseCacheIsBoundedByCountAndBytes) {
  StartDaemon();
  Child by_count;
  ASSERT_TRUE(by_count.Start({TENANT_PROBE, "many:2:40", "freeall", "many:2:40", "check"},
                             TenantEnv("ls", "count")));
  EXPECT_EQ(by_count.Wait(), 0);
  EXPECT_NE(by_count.out().find("many 2 40 ok imports=40\n"), std::string::npos) << by_count.out();
  EXPECT_NE(by_count.out().find("many 2 40 ok imports=8\n"), std::string::npos) << by_count.out();
  EXPECT_NE(by_count.out().find("check ok"), std::string::npos) << by_count.out();
  ASSERT_EQ(LeasedWithin3s(0), 0u);

  auto env = TenantEnv("ls", "bytes");
  env["MISSILE_QUOTA"] = "256MiB";
  Child by_bytes;
  ASSERT_TRUE(by_bytes.Start({TENANT_PROBE, "many:16:4", "freeall", "many:16:4", "check",
                              "freeall", "alloc:64", "freeall", "loop:64:3"},
                             env));
  EXPECT_EQ(by_bytes.Wait(), 0);
  EXPECT_NE(by_bytes.out().find("many 16 4 ok imports=4\n"), std::string::npos) << by_bytes.out();
  EXPECT_NE(by_bytes.out().find("many 16 4 ok imports=2\n"), std::string::npos) << by_bytes.out();
  EXPECT_NE(by_bytes.out().find("check ok"), std::string::npos) << by_bytes.out();
  // A range larger than the bound is never cached: each allocation imports.
  EXPECT_NE(by_bytes.out().find("loop 64 3 ok imports=3\n"), std::string::npos) << by_bytes.out();
}

// The byte bound also follows the quota the daemon sets (here the BE class's), not only the one
// the tenant asks for.
TEST_F(DaemonTest, ReuseCacheBoundFollowsTheDaemonsQuota) {
  StartDaemon("[classes.be]\ntenant_quota = \"256MiB\"\n");
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "many:16:4", "freeall", "many:16:4", "check"},
                      TenantEnv("be", "bytes")));
  EXPECT_EQ(t.Wait(), 0);
  EXPECT_NE(t.out().find("many 16 4 ok imports=4\n"), std::string::npos) << t.out();
  // An eighth of 256 MiB: two of the four 16 MiB ranges stayed cached.
  EXPECT_NE(t.out().find("many 16 4 ok imports=2\n"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("check ok"), std::string::npos) << t.out();
}

// Memory the tenant freed but the shim still caches counts against its quota; an allocation
// that only fits once it goes back must succeed, and the data of the next allocation is its own.
TEST_F(DaemonTest, AllocationOverQuotaReturnsTheCacheAndSucceeds) {
  StartDaemon("[classes.be]\ntenant_quota = \"64MiB\"\n");
  for (const char* blocks : {"single", "chunks"}) {
    SCOPED_TRACE(blocks);
    auto env = TenantEnv("be", std::string("quota-") + blocks);
    env["MISSILE_BLOCKS"] = blocks;
    Child t;
    ASSERT_TRUE(t.Start({TENANT_PROBE, "alloc:48", "freeall", "alloc:32", "alloc:30", "check",
                         "info", "hold"},
                        env));
    ASSERT_EQ(t.WaitForLine("ready"), "ready");
    EXPECT_NE(t.out().find("alloc 48 ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("alloc 32 ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("alloc 30 ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("check ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("info free=2097152 total=67108864"), std::string::npos) << t.out();
    EXPECT_EQ(Leased(), 62 * kMiB);
    t.CloseStdin();
    EXPECT_EQ(t.Wait(), 0);
    ASSERT_EQ(LeasedWithin3s(0), 0u);
  }
}

TEST_F(DaemonTest, VmmStreamOrderedAndPointerQueriesWork) {
  StartDaemon();
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "vmm:6", "async:8", "alloc:3", "range", "freeall", "info"},
                      TenantEnv("be")));
  EXPECT_EQ(t.Wait(), 0);
  EXPECT_NE(t.out().find("vmm 6 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("async 8 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("range base_ok=1 size=3145728 rc=0"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("freeall ok"), std::string::npos) << t.out();
}

// Colour placement end to end: a profile for the test double's GPU with a one-bit XOR channel
// hash (2 MiB chunks alternate between two channels), blocks whose synthetic physical
// addresses the test double reports, and an LS and a BE tenant that must land on disjoint
// channels.
TEST_F(DaemonTest, ColourPlacementPutsLsAndBeOnDisjointChannels) {
  constexpr uint64_t kMask = uint64_t{1} << 21;
  colorer::GpuColourProfile profile;
  profile.gpu_name = "Fake GPU (missile test double)";
  profile.uuid = "GPU-66616b65-6375-6461-2d67-707500000000";  // the test double's device 0
  profile.driver_version = "test double";
  profile.tool_version = "test";
  profile.date = "2026-11-29T00:00:00Z";
  profile.granularity_bytes = 2 * kMiB;
  profile.colours = 2;
  profile.channel_map.kind = colorer::ChannelMapSpec::Kind::kXor;
  profile.channel_map.masks = {kMask};
  mkdir((dir_.path() + "/profiles").c_str(), 0755);
  ASSERT_TRUE(colorer::SaveProfile(profile, dir_.path() + "/profiles/" + profile.uuid + ".toml").ok());
  StartDaemon();
  Child ls, be;
  ASSERT_TRUE(ls.Start({TENANT_PROBE, "alloc:16", "hold", "check"}, TenantEnv("ls", "web")));
  ASSERT_EQ(ls.WaitForLine("ready"), "ready");
  ASSERT_TRUE(be.Start({TENANT_PROBE, "alloc:16", "hold", "check"}, TenantEnv("be", "batch")));
  ASSERT_EQ(be.WaitForLine("ready"), "ready");
  auto channels = [&](const std::string& out) {
    std::set<int> set;
    for (const std::string& p : PhysOf(out)) set.insert((std::stoull(p) & kMask) != 0);
    return set;
  };
  std::set<int> ls_channels = channels(ls.out()), be_channels = channels(be.out());
  ASSERT_EQ(PhysOf(ls.out()).size(), 8u) << ls.out();
  ASSERT_EQ(PhysOf(be.out()).size(), 8u) << be.out();
  EXPECT_EQ(ls_channels.size(), 1u) << ls.out();
  EXPECT_EQ(be_channels.size(), 1u) << be.out();
  EXPECT_NE(ls_channels, be_channels) << "LS and BE share a channel";
  v1::StatusResponse st = Status();
  ASSERT_EQ(st.pools_size(), 1);
  const v1::PoolStatus& pool = st.pools(0);
  EXPECT_EQ(pool.gpu().colours(), 2u);
  ASSERT_EQ(pool.colours_size(), 2);
  uint64_t capacity = 0, used = 0;
  for (const v1::ColourUse& c : pool.colours()) {
    capacity += c.capacity_bytes();
    used += c.used_bytes();
  }
  EXPECT_EQ(capacity, pool.created_bytes());  // capacity per colour adds up
  EXPECT_EQ(used, pool.leased_bytes());
  EXPECT_EQ(used, 32 * kMiB);
  ls.CloseStdin();
  be.CloseStdin();
  EXPECT_EQ(ls.Wait(), 0);
  EXPECT_EQ(be.Wait(), 0);
  EXPECT_NE(ls.out().find("check ok"), std::string::npos);
  EXPECT_NE(be.out().find("check ok"), std::string::npos);
}

}  // namespace
}  // namespace missile::process_test

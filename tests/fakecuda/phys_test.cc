// Synthetic physical addresses (machine-wide, in order or shuffled) and the channel hash.

#include <algorithm>
#include <set>
#include <vector>

#include "test_util.h"

namespace fakecuda_test {
namespace {

// In a child with its own state file: creates `count` chunks of `chunk` bytes and writes their
// physical addresses to `out_fd`. Keeps them unless `release`.
int CreateChunks(const std::string& shm, const char* shuffle, int count, size_t chunk, int out_fd,
                 const char* total_mem = nullptr) {
  setenv("FAKECUDA_SHM", shm.c_str(), 1);
  if (shuffle != nullptr) setenv("FAKECUDA_PHYS_SHUFFLE", shuffle, 1);
  if (total_mem != nullptr) setenv("FAKECUDA_TOTAL_MEM", total_mem, 1);
  if (cuInit(0) != CUDA_SUCCESS) return 1;
  const CUmemAllocationProp prop = DeviceProp();
  for (int i = 0; i < count; ++i) {
    CUmemGenericAllocationHandle h = 0;
    unsigned long long phys = 0;
    const CUresult r = cuMemCreate(&h, chunk, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      WriteU64(out_fd, ~0ull);
      continue;
    }
    if (r != CUDA_SUCCESS || fakecudaChunkPhysAddr(h, &phys) != CUDA_SUCCESS) return 2;
    WriteU64(out_fd, phys);
  }
  return 0;
}

std::vector<uint64_t> Read(int fd, int count) {
  std::vector<uint64_t> v;
  for (int i = 0; i < count; ++i) v.push_back(ReadU64(fd));
  return v;
}

TEST(PhysTest, InIncreasingOrderAndUniqueAcrossProcesses) {
  const ShmGuard shm(UniqueShmName("phys"));
  int p[2];
  ASSERT_EQ(0, pipe(p));
  ASSERT_TRUE(
      ExitedOk(RunInChild([&] { return CreateChunks(shm.name, nullptr, 3, kTwoMiB, p[1]); })));
  ASSERT_TRUE(
      ExitedOk(RunInChild([&] { return CreateChunks(shm.name, nullptr, 1, 4 * kTwoMiB, p[1]); })));
  const std::vector<uint64_t> phys = Read(p[0], 4);
  close(p[0]);
  close(p[1]);
  // The first child's chunks were freed when it exited, but the cursor moves on machine-wide.
  EXPECT_EQ(phys, (std::vector<uint64_t>{0, kTwoMiB, 2 * kTwoMiB, 3 * kTwoMiB}));
}

TEST(PhysTest, ShuffledFromASeededPermutation) {
  auto run = [](const char* seed, int count) {
    const ShmGuard shm(UniqueShmName("shuffle"));
    int p[2];
    EXPECT_EQ(0, pipe(p));
    const int status =
        RunInChild([&] { return CreateChunks(shm.name, seed, count, kTwoMiB, p[1], "64M"); });
    EXPECT_TRUE(ExitedOk(status)) << status;
    std::vector<uint64_t> v = Read(p[0], count);
    close(p[0]);
    close(p[1]);
    return v;
  };
  const std::vector<uint64_t> a = run("42", 32);  // all 32 frames of a 64 MiB device
  const std::vector<uint64_t> b = run("42", 32);
  const std::vector<uint64_t> c = run("43", 32);
  EXPECT_EQ(a, b);  // the same seed gives the same order
  EXPECT_NE(a, c);
  EXPECT_FALSE(std::is_sorted(a.begin(), a.end()));
  std::vector<uint64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    EXPECT_EQ(sorted[i], i * kTwoMiB);  // a permutation of every frame
  }
}

TEST(PhysTest, FramesOfDeadProcessesAreReclaimed) {
  const ShmGuard shm(UniqueShmName("reclaim"));
  int p[2];
  ASSERT_EQ(0, pipe(p));
  // Each child fills the 8 MiB device (4 frames) and exits without releasing anything.
  for (int round = 0; round < 2; ++round) {
    const int status =
        RunInChild([&] { return CreateChunks(shm.name, nullptr, 4, kTwoMiB, p[1], "8M"); });
    ASSERT_TRUE(ExitedOk(status));
    const std::vector<uint64_t> phys = Read(p[0], 4);
    EXPECT_EQ(std::set<uint64_t>(phys.begin(), phys.end()).size(), 4u) << round;
    EXPECT_EQ(std::count(phys.begin(), phys.end(), ~0ull), 0) << round;
  }
  close(p[0]);
  close(p[1]);
}

TEST(PhysTest, LiveFramesAreNotHandedOutTwice) {
  const ShmGuard shm(UniqueShmName("live"));
  int p[2];
  int go[2];
  ASSERT_EQ(0, pipe(p));
  ASSERT_EQ(0, pipe(go));
  // A child holds 3 of the 4 frames while another child asks for 2.
  const pid_t holder = ForkChild([&] {
    const int r = CreateChunks(shm.name, nullptr, 3, kTwoMiB, p[1], "8M");
    ReadU64(go[0]);  // hold until told
    return r;
  });
  const std::vector<uint64_t> held = Read(p[0], 3);
  ASSERT_TRUE(ExitedOk(
      RunInChild([&] { return CreateChunks(shm.name, nullptr, 2, kTwoMiB, p[1], "8M"); })));
  const std::vector<uint64_t> second = Read(p[0], 2);
  WriteU64(go[1], 1);
  ASSERT_TRUE(ExitedOk(WaitChild(holder)));
  std::set<uint64_t> all(held.begin(), held.end());
  EXPECT_NE(second[0], ~0ull);
  EXPECT_EQ(all.count(second[0]), 0u);
  EXPECT_EQ(second[1], ~0ull);  // the device's frames are all in use
  for (int fd : {p[0], p[1], go[0], go[1]}) close(fd);
}

TEST(PhysTest, ChannelHash) {
  EXPECT_EQ(fakecudaChannelCount(), 1);  // no masks in this process
  EXPECT_EQ(fakecudaChannelOf(0x123456789ull), 0);
  const int status = RunInChild([] {
    setenv("FAKECUDA_CHANNEL_MASKS", "0x200000,400000", 1);
    EXPECT_EQ(fakecudaChannelCount(), 4);
    EXPECT_EQ(fakecudaChannelOf(0), 0);
    EXPECT_EQ(fakecudaChannelOf(0x200000), 1);
    EXPECT_EQ(fakecudaChannelOf(0x400000), 2);
    EXPECT_EQ(fakecudaChannelOf(0x600000), 3);
    EXPECT_EQ(fakecudaChannelOf(0x600000 | 0x1fffff), 3);  // bits outside the masks do not count
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
  const int parity = RunInChild([] {
    setenv("FAKECUDA_CHANNEL_MASKS", "0x600000", 1);  // parity of two bits
    EXPECT_EQ(fakecudaChannelCount(), 2);
    EXPECT_EQ(fakecudaChannelOf(0x200000), 1);
    EXPECT_EQ(fakecudaChannelOf(0x400000), 1);
    EXPECT_EQ(fakecudaChannelOf(0x600000), 0);
    return 0;
  });
  EXPECT_TRUE(ExitedOk(parity)) << parity;
}

}  // namespace
}  // namespace fakecuda_test

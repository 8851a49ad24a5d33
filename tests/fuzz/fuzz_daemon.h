// What the daemon's fuzz targets share: a DaemonCore in this process over the fake BlockSource
// (daemon/testing/fake_block_source.h; a misuse of it aborts) with one GPU that has a copy
// arbiter (no thread: nothing polls it in these targets) and a pacing domain, the daemon's
// loggers silenced, a byte reader for the fuzzer's input, and a descriptor count to tell leaks.
// Each input gets a DaemonCore of its own, so a crash replays from its input alone.
#ifndef MISSILE_TESTS_FUZZ_FUZZ_DAEMON_H_
#define MISSILE_TESTS_FUZZ_FUZZ_DAEMON_H_

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/copy_arbiter.h"
#include "daemon/core.h"
#include "daemon/logger.h"
#include "daemon/pacing_domain.h"
#include "daemon/testing/fake_block_source.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_policy.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::daemon::fuzz {

inline constexpr uint64_t kGranule = uint64_t{2} << 20;

// One GPU of 32 granules; each tenant may hold 8, each class 16; a copy arbiter without its
// thread and a pacing domain.
inline Gpu MakeGpu() {
  Gpu gpu;
  gpu.info.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  gpu.info.name = "fuzz";
  gpu.info.total_bytes = 32 * kGranule;
  gpu.info.granularity = kGranule;
  gpu.source = std::make_unique<FakeBlockSource>();
  gpu.quota[ClassIndex(TenantClass::kLatencySensitive)] = {8 * kGranule, 16 * kGranule};
  gpu.quota[ClassIndex(TenantClass::kBestEffort)] = {8 * kGranule, 16 * kGranule};
  PoolOptions options;
  options.granularity = kGranule;
  options.capacity_bytes = 32 * kGranule;
  options.cache_limit_bytes = 4 * kGranule;
  auto map = colorer::UniformChannelMap::Create(1);
  auto scheme = colorer::ColourScheme::EvenSplit(
      std::shared_ptr<const colorer::ChannelMap>(*std::move(map)), 1);
  auto policy = colorer::ColourPolicy::Create(*scheme);
  auto pool = VramPool::Create(options, gpu.source.get(), *policy,
                               gpu.quota[ClassIndex(TenantClass::kLatencySensitive)],
                               gpu.quota[ClassIndex(TenantClass::kBestEffort)]);
  if (!pool.ok()) {
    fprintf(stderr, "fuzz: pool: %s\n", pool.status().ToString().c_str());
    abort();
  }
  gpu.pool = *std::move(pool);
  CopyArbiter::Options arbiter;
  arbiter.scheduler.chunk_bytes = kGranule;
  arbiter.start_thread = false;
  auto a = CopyArbiter::Create(arbiter);
  if (a.ok()) gpu.arbiter = *std::move(a);
  auto pacing = PacingDomain::Create(PacingSettings{});
  if (pacing.ok()) gpu.pacing = *std::move(pacing);
  return gpu;
}

// A DaemonCore over one MakeGpu. Not started: its process watcher would make every input wait
// for its 200 ms wake-up at the end; the sessions end with the core instead.
inline std::unique_ptr<DaemonCore> MakeCore(std::string fd_socket_path = "") {
  std::vector<Gpu> gpus;
  gpus.push_back(MakeGpu());
  CoreOptions options;
  options.fd_socket_path = std::move(fd_socket_path);
  options.admin_gid = 4242;
  return std::make_unique<DaemonCore>(options, std::move(gpus));
}

// The daemon logs every refusal; the fuzzer makes millions.
inline void SilenceDaemonLogs() { SetLogLevel(spdlog::level::off); }

// How many descriptors this process has open (to tell a leak).
inline int OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n;
}

// Reads the fuzzer's input front to back; past its end every read gives zeros.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  size_t left() const { return size_ - pos_; }
  template <typename T>
  T Get() {
    T v{};
    size_t n = std::min(sizeof(T), left());
    if (n > 0) memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }
  std::string Take(size_t n) {
    n = std::min(n, left());
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace missile::daemon::fuzz

#endif  // MISSILE_TESTS_FUZZ_FUZZ_DAEMON_H_

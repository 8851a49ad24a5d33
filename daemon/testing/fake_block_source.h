// A BlockSource with no GPU behind it, for the daemon's tests and fuzz targets: blocks are
// numbers, a block's descriptor is a fresh memfd, colours cycle through a pattern, calls are
// counted, and Create or Scrub fail on demand. Header-only and free of gtest, so the fuzz
// targets (which do not link gtest) can use it too.
#ifndef MISSILE_DAEMON_TESTING_FAKE_BLOCK_SOURCE_H_
#define MISSILE_DAEMON_TESTING_FAKE_BLOCK_SOURCE_H_

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/vram_pool.h"
#include "missile/colorer/channel_set.h"

namespace missile::daemon {

// Thread-safe: the daemon's core and pools call a source from several threads.
class FakeBlockSource : public BlockSource {
 public:
  // Told of a misuse by the code under test: a block destroyed twice or unknown, a scrub or a
  // descriptor asked for a block that is not live, or blocks still live when the source goes
  // (a leak). Called with the source's lock held, so it must not call back into the source.
  using MisuseHandler = std::function<void(const std::string& what)>;

  // The default handler: fuzz targets and tests without gtest's checks in reach want a misuse
  // to be a crash, which the fuzzer records and a test run reports.
  static void AbortOnMisuse(const std::string& what) {
    fprintf(stderr, "FakeBlockSource: %s\n", what.c_str());
    abort();
  }

  // Block i (from 0) has colour colours[i % colours.size()]; colours must not be empty.
  explicit FakeBlockSource(
      std::vector<colorer::ColourSet> colours = {colorer::ColourSet::Single(0)},
      MisuseHandler on_misuse = AbortOnMisuse)
      : colours_(std::move(colours)), on_misuse_(std::move(on_misuse)) {}
  ~FakeBlockSource() override {
    absl::MutexLock lock(&mu_);
    if (!live_.empty()) on_misuse_(std::to_string(live_.size()) + " blocks leaked");
  }
  FakeBlockSource(const FakeBlockSource&) = delete;
  FakeBlockSource& operator=(const FakeBlockSource&) = delete;

  absl::StatusOr<PhysicalBlock> Create(uint64_t bytes) override {
    absl::MutexLock lock(&mu_);
    ++creates_;
    if (fail_create_at_ != 0 && creates_ == fail_create_at_) {
      return absl::InternalError("fake: create failed");
    }
    PhysicalBlock block{next_handle_++, bytes, colours_[next_colour_++ % colours_.size()]};
    live_[block.handle] = bytes;
    return block;
  }
  void Destroy(const PhysicalBlock& block) override {
    absl::MutexLock lock(&mu_);
    ++destroys_;
    if (live_.erase(block.handle) != 1) {
      on_misuse_("block " + std::to_string(block.handle) + " destroyed twice or unknown");
    }
    destroyed_.push_back(block.handle);
  }
  absl::Status Scrub(const PhysicalBlock& block) override {
    absl::MutexLock lock(&mu_);
    ++scrubs_;
    if (!live_.contains(block.handle)) {
      on_misuse_("scrub of block " + std::to_string(block.handle) + ", which is not live");
    }
    return fail_scrubs_ ? absl::UnavailableError("fake: scrub failed") : absl::OkStatus();
  }
  // A memfd stands for the block: a real descriptor that can travel over a socket and that
  // counts in a process's open descriptors, so leaks of it show. The caller closes it.
  absl::StatusOr<int> DuplicateDescriptor(const PhysicalBlock& block) override {
    absl::MutexLock lock(&mu_);
    if (!live_.contains(block.handle)) {
      on_misuse_("descriptor of block " + std::to_string(block.handle) + ", which is not live");
      return absl::NotFoundError("fake: no such block");
    }
    const int fd = memfd_create("fake-block", MFD_CLOEXEC);
    if (fd < 0) return absl::InternalError("fake: memfd_create failed");
    return fd;
  }

  // The n-th Create from now (1-based) fails.
  void FailCreateAt(int n) {
    absl::MutexLock lock(&mu_);
    fail_create_at_ = creates_ + n;
  }
  // Every Scrub from now fails (or, with false, none does).
  void FailScrubs(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_scrubs_ = fail;
  }

  int creates() const {
    absl::MutexLock lock(&mu_);
    return creates_;
  }
  int destroys() const {
    absl::MutexLock lock(&mu_);
    return destroys_;
  }
  int scrubs() const {
    absl::MutexLock lock(&mu_);
    return scrubs_;
  }
  uint64_t live_bytes() const {
    absl::MutexLock lock(&mu_);
    uint64_t sum = 0;
    for (const auto& [handle, bytes] : live_) sum += bytes;
    return sum;
  }
  // Handles in the order Destroy was called.
  std::vector<uint64_t> destroyed() const {
    absl::MutexLock lock(&mu_);
    return destroyed_;
  }

 private:
  mutable absl::Mutex mu_;
  const std::vector<colorer::ColourSet> colours_;
  const MisuseHandler on_misuse_;
  size_t next_colour_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 100;
  int creates_ ABSL_GUARDED_BY(mu_) = 0;
  int destroys_ ABSL_GUARDED_BY(mu_) = 0;
  int scrubs_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_create_at_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_scrubs_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, uint64_t> live_ ABSL_GUARDED_BY(mu_);  // handle -> bytes
  std::vector<uint64_t> destroyed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_TESTING_FAKE_BLOCK_SOURCE_H_

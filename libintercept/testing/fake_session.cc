#include "testing/fake_session.h"

#include <sys/eventfd.h>

#include <algorithm>

namespace missile::shim::testing {

FakeSession::FakeSession(std::vector<GpuLink> gpus, uint64_t quota_bytes, std::string instance)
    : gpus_(std::move(gpus)), quota_bytes_(quota_bytes), instance_(std::move(instance)) {}

absl::StatusOr<std::vector<BlockLease>> FakeSession::Allocate(uint32_t gpu, bool single,
                                                              uint64_t bytes) {
  if (!connected()) return absl::UnavailableError("session ended");
  absl::MutexLock lock(&mu_);
  const uint64_t granularity = gpus_.at(gpu).granularity;
  if (quota_bytes_ != 0 && used_ + bytes > quota_bytes_) {
    leases_.push_back({gpu, single, bytes, false});
    return absl::ResourceExhaustedError("tenant quota");
  }
  leases_.push_back({gpu, single, bytes, true});
  std::vector<BlockLease> out;
  const uint64_t block_bytes = single ? bytes : granularity;
  for (uint64_t done = 0; done < bytes; done += block_bytes) {
    BlockLease l;
    l.id = next_block_++;
    l.bytes = block_bytes;
    l.fd = eventfd(0, EFD_CLOEXEC);
    held_.push_back({l.id, l.bytes});
    out.push_back(l);
  }
  used_ += bytes;
  return out;
}

absl::Status FakeSession::Free(uint32_t gpu, const std::vector<uint64_t>& block_ids) {
  (void)gpu;
  if (!connected()) return absl::UnavailableError("session ended");
  absl::MutexLock lock(&mu_);
  frees_.push_back(block_ids);
  for (uint64_t id : block_ids) {
    auto it = std::find_if(held_.begin(), held_.end(), [id](const auto& h) { return h.first == id; });
    if (it == held_.end()) return absl::NotFoundError("block not held");
    used_ -= it->second;
    held_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<TenantUsage> FakeSession::Usage(uint32_t gpu) {
  if (!connected()) return absl::UnavailableError("session ended");
  absl::MutexLock lock(&mu_);
  TenantUsage u;
  u.quota_bytes = quota_bytes_ != 0 ? quota_bytes_ : gpus_.at(gpu).total_bytes;
  u.used_bytes = used_;
  u.available_bytes = u.quota_bytes - std::min(u.quota_bytes, used_);
  return u;
}

absl::StatusOr<std::pair<int, int>> FakeSession::OpenCopyChannel(uint32_t gpu) {
  (void)gpu;
  return absl::UnimplementedError("no copy channel in this fake");
}

absl::StatusOr<std::pair<int, int>> FakeSession::OpenPacing(uint32_t gpu) {
  (void)gpu;
  return absl::UnimplementedError("no pacing in this fake");
}

absl::StatusOr<int> FakeSession::OpenPeerLanes(uint32_t gpu, uint32_t slot, uint64_t epoch) {
  (void)gpu;
  (void)slot;
  (void)epoch;
  return absl::UnimplementedError("no pacing in this fake");
}

bool FakeSession::AwaitEnd(absl::Duration limit) const {
  (void)limit;
  return !connected();
}

std::vector<FakeSession::Lease> FakeSession::leases() const {
  absl::MutexLock lock(&mu_);
  return leases_;
}

std::vector<std::vector<uint64_t>> FakeSession::frees() const {
  absl::MutexLock lock(&mu_);
  return frees_;
}

uint64_t FakeSession::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

void FakeConnector::Queue(std::unique_ptr<FakeSession> session) {
  absl::MutexLock lock(&mu_);
  queued_.push_back(std::move(session));
}

bool FakeConnector::SocketExists(const std::string& path) {
  (void)path;
  return socket_exists_.load();
}

bool FakeConnector::Listening(const std::string& path) {
  (void)path;
  absl::MutexLock lock(&mu_);
  return !queued_.empty();
}

absl::StatusOr<std::unique_ptr<SessionClient>> FakeConnector::Connect(const TenantIdentity& who) {
  (void)who;
  connects_.fetch_add(1);
  absl::MutexLock lock(&mu_);
  if (queued_.empty()) return absl::UnavailableError("nobody listens");
  std::unique_ptr<SessionClient> s = std::move(queued_.front());
  queued_.erase(queued_.begin());
  return s;
}

}  // namespace missile::shim::testing

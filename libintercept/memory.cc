#include "memory.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "address_space.h"
#include "session_policy.h"
#include "small_allocator.h"

namespace missile::shim {
namespace {

// Frees go back to the daemon once this many blocks are pending (or at a capacity query, or
// when an allocation hits the quota).
constexpr size_t kFreeBatchBlocks = 32;
// A freed range stays mapped for the next allocation of its rounded size, which then costs no
// round trip and no driver call (p99 under 1 us on the H200). A new one costs a round trip, an
// import, a map and an access change in the shim and, when the daemon's cache has no block of
// that size, a create and an export in the daemon: p99 0.3-0.7 ms for 2-64 MiB
// (docs/results.md, 2026-11-29-alloc2-h200). The cache holds at most as many ranges as a free
// batch has blocks, and at most kReuseMaxBytes, or an eighth of the GPU (of the tenant's quota,
// if smaller): the daemon counts cached memory against the tenant, its class and the pool, and
// other tenants cannot have it until it is evicted. 1 GiB covers the sizes bench/alloc_latency
// loops over; an allocation that hits the quota returns the whole cache first, so the bound only
// limits what a tenant keeps from the others.
constexpr size_t kReuseMaxRanges = kFreeBatchBlocks;
constexpr uint64_t kReuseMaxBytes = uint64_t{1} << 30;
constexpr uint64_t kSmallMax = uint64_t{1} << 20;
constexpr uint64_t kAlignment = 256;  // what cuMemAlloc guarantees

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

std::string Uuid(const CUuuid& u) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char buf[64];
  snprintf(buf, sizeof(buf),
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}

absl::Status DriverStatus(const DriverApi& api, const char* what, CUresult r) {
  const char* name = nullptr;
  if (api.GetErrorName != nullptr) api.GetErrorName(r, &name);
  std::string text = std::string(what) + ": " + (name ? name : "CUDA error") + " (" +
                     std::to_string(static_cast<int>(r)) + ")";
  return r == CUDA_ERROR_OUT_OF_MEMORY ? absl::ResourceExhaustedError(text)
                                       : absl::InternalError(text);
}

// Whether something accepts connections on the Unix socket (a stale socket file of a killed
// daemon refuses them), without going through gRPC.
bool Listening(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

struct MemoryManager::Device {
  DaemonClient* client = nullptr;  // the session this GPU's state belongs to
  uint64_t serial = 0;  // the tag of its allocations in the table
  uint32_t gpu = 0;  // the daemon's index
  CUdevice dev = 0;
  int ordinal = 0;
  uint64_t granularity = 0;
  uint64_t small_max = 0;  // allocations up to this are carved from held blocks
  bool single_blocks = true;  // back a large allocation with one block, not one per granule
  uint64_t device_total = 0;
  CUdeviceptr va_base = 0;
  uint64_t va_size = 0;
  uint64_t reuse_max_bytes = 0;  // the reuse cache's byte bound (kReuseMaxBytes)
  std::unique_ptr<SmallAllocator> small;
  absl::Mutex mu;
  std::optional<AddressSpace> space ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<CUdeviceptr, Mapping> mappings ABSL_GUARDED_BY(mu);
  // Freed ranges, still mapped, oldest first. At most kReuseMaxRanges: a scan is cheaper than
  // an index by size.
  struct Cached {
    CUdeviceptr va;
    Mapping mapping;
  };
  std::vector<Cached> reuse ABSL_GUARDED_BY(mu);
  uint64_t reuse_bytes ABSL_GUARDED_BY(mu) = 0;
  std::vector<uint64_t> pending_free ABSL_GUARDED_BY(mu);
};

MemoryManager::MemoryManager(const Config& config, const DriverApi& api, spdlog::logger* log)
    : config_(config), api_(api), log_(log) {}

MemoryManager::~MemoryManager() {
  {
    absl::MutexLock lock(&reconnect_mu_);
    stop_reconnect_ = true;
    reconnect_cv_.SignalAll();
  }
  if (reconnect_.joinable()) reconnect_.join();
}

TenantIdentity MemoryManager::Identity() const {
  TenantIdentity who;
  who.socket_path = config_.socket_path;
  who.name = config_.tenant_name.empty() ? program_invocation_short_name : config_.tenant_name;
  who.latency_sensitive = config_.latency_sensitive;
  who.quota_bytes = config_.quota_bytes;
  return who;
}

DaemonClient* MemoryManager::Client() {
  if (DaemonClient* c = client_ptr_.load(std::memory_order_acquire)) return c;
  if (client_failed_.load(std::memory_order_acquire)) return nullptr;
  absl::MutexLock lock(&client_mu_);
  if (client_tried_) return clients_.empty() ? nullptr : clients_.back().get();
  client_tried_ = true;
  TenantIdentity who = Identity();
  absl::StatusOr<std::unique_ptr<DaemonClient>> c;
  if (access(who.socket_path.c_str(), F_OK) != 0) {
    c = absl::UnavailableError("no socket at " + who.socket_path);
  } else {
    c = DaemonClient::Connect(who);
  }
  if (!c.ok()) {
    if (config_.refuse_without_daemon) {
      log_->error("cannot reach missiled ({}); MISSILE_NO_DAEMON=refuse: device allocations will "
                  "fail with CUDA_ERROR_OUT_OF_MEMORY", std::string(c.status().message()));
    } else {
      log_->warn("cannot reach missiled ({}); the program uses the GPU directly, without quotas "
                 "(MISSILE_NO_DAEMON=passthrough)", std::string(c.status().message()));
    }
    client_failed_.store(true, std::memory_order_release);
    return nullptr;
  }
  clients_.push_back(std::move(*c));
  DaemonClient* raw = clients_.back().get();
  log_->info("registered with missiled as '{}' ({}), session {}", who.name,
             who.latency_sensitive ? "ls" : "be", raw->session_id());
  client_ptr_.store(raw, std::memory_order_release);
  return raw;
}

void MemoryManager::ReconnectLoop() {
  absl::MutexLock lock(&reconnect_mu_);
  while (!stop_reconnect_) {
    reconnect_cv_.WaitWithTimeout(&reconnect_mu_, absl::Seconds(1));
    if (stop_reconnect_) break;
    DaemonClient* current = client_ptr_.load(std::memory_order_acquire);
    if (current == nullptr || current->connected()) continue;
    bool give_up = false;
    {
      reconnect_mu_.Unlock();
      give_up = TryRegisterAgain(current);
      reconnect_mu_.Lock();
    }
    if (give_up) break;
  }
}

bool MemoryManager::TryRegisterAgain(DaemonClient* ended) {
  TenantIdentity who = Identity();
  if (!Listening(who.socket_path)) return false;  // not (yet) restarted
  absl::StatusOr<std::unique_ptr<DaemonClient>> c = DaemonClient::Connect(who);
  if (!c.ok()) {
    if (!register_failure_logged_.exchange(true)) {
      log_->warn("registering again with missiled failed ({}); trying every second",
                 std::string(c.status().message()));
    }
    return false;
  }
  if (!KeepNewSession(ended->instance(), (*c)->instance())) {
    // The daemon that ended the session still runs: it took back the session's blocks, which
    // this process still maps, and might lease them to this process again. Dropping the new
    // client ends the new session before it leased anything.
    log_->warn("missiled ended this process's session but still runs; the process goes on "
               "without registering again");
    return true;
  }
  DaemonClient* raw = c->get();
  {
    absl::MutexLock lock(&client_mu_);
    clients_.push_back(std::move(*c));
  }
  {
    // The ended session's Devices only take frees from now on (found by serial).
    absl::MutexLock lock(&devices_mu_);
    devices_.clear();
  }
  client_ptr_.store(raw, std::memory_order_release);
  log_->warn("registered again with a restarted missiled, session {}: new device allocations "
             "are served by it; memory allocated before stays as it is", raw->session_id());
  return false;
}

bool MemoryManager::connected() const {
  DaemonClient* c = client_ptr_.load(std::memory_order_acquire);
  return c != nullptr && c->connected();
}

DaemonClient* MemoryManager::Serving() {
  DaemonClient* c = Client();
  if (c == nullptr || c->connected()) return c;
  if (lost_logged_for_.exchange(c) != c) {
    if (config_.refuse_without_daemon) {
      log_->error("the session with missiled has ended; new device allocations fail with "
                  "CUDA_ERROR_OUT_OF_MEMORY (MISSILE_NO_DAEMON=refuse) until a restarted "
                  "missiled takes the process back");
    } else {
      log_->warn("the session with missiled has ended; new device allocations go to the driver "
                 "directly, without quotas (MISSILE_NO_DAEMON=passthrough), until a restarted "
                 "missiled takes the process back");
    }
    // Its reuse caches would never be used again: unmap them now, so the memory goes back to
    // the GPU rather than waiting for the program's next free on each GPU.
    std::vector<Device*> ended;
    {
      absl::MutexLock lock(&devices_mu_);
      for (const auto& d : all_devices_) {
        if (d->client == c) ended.push_back(d.get());
      }
    }
    for (Device* d : ended) ReturnFreed(*d);
    if (!reconnect_started_.exchange(true)) reconnect_ = std::thread([this] { ReconnectLoop(); });
  }
  return nullptr;
}

std::optional<CUresult> MemoryManager::Unmanaged(const char* what) {
  if (config_.refuse_without_daemon) return CUDA_ERROR_OUT_OF_MEMORY;
  return std::nullopt;
}

absl::StatusOr<MemoryManager::Device*> MemoryManager::DeviceOf(CUdevice dev) {
  DaemonClient* client = Client();
  if (client == nullptr) return absl::UnavailableError("no daemon");
  {
    absl::MutexLock lock(&devices_mu_);
    auto it = devices_.find(static_cast<int>(dev));
    if (it != devices_.end() && it->second->client == client) return it->second;
  }
  CUuuid uuid{};
  if (CUresult r = api_.DeviceGetUuid(&uuid, dev); r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuDeviceGetUuid", r);
  }
  std::string id = Uuid(uuid);
  const GpuLink* link = nullptr;
  for (const GpuLink& g : client->gpus()) {
    if (g.uuid == id) link = &g;
  }
  if (link == nullptr) return absl::NotFoundError("missiled does not manage " + id);
  // A session that ended meanwhile gets no new state (it could never hold memory).
  if (!client->connected()) return absl::UnavailableError("the session with missiled ended");
  auto d = std::make_unique<Device>();
  d->client = client;
  d->gpu = link->index;
  d->dev = dev;
  d->ordinal = static_cast<int>(dev);
  d->granularity = link->granularity;
  d->single_blocks = config_.blocks == Config::Blocks::kSingle ||
                     (config_.blocks == Config::Blocks::kAuto && link->colours <= 1);
  d->device_total = link->total_bytes;
  uint64_t share = link->total_bytes;
  if (config_.quota_bytes != 0) share = std::min(share, config_.quota_bytes);
  // The quota the daemon holds this tenant to (its class's default, or what an admin set), as
  // it is now; a later change does not resize the cache.
  if (auto usage = client->Usage(link->index); usage.ok() && usage->quota_bytes != 0) {
    share = std::min(share, usage->quota_bytes);
  }
  d->reuse_max_bytes = std::min(kReuseMaxBytes, share / 8);
  // Twice the device's memory: room for fragmentation without ever running out of addresses.
  d->va_size = RoundUp(link->total_bytes * 2, link->granularity);
  if (CUresult r = api_.MemAddressReserve(&d->va_base, d->va_size, link->granularity, 0, 0);
      r != CUDA_SUCCESS) {
    // The program then uses the driver directly on this GPU: say so once.
    if (!reserve_failure_logged_.exchange(true)) {
      log_->warn("reserving {} bytes of addresses on device {} failed ({}); its allocations go "
                 "to the driver directly", d->va_size, static_cast<int>(dev), static_cast<int>(r));
    }
    return DriverStatus(api_, "reserving the address range", r);
  }
  auto space = AddressSpace::Create(d->va_base, d->va_size, link->granularity);
  if (!space.ok()) return space.status();
  SmallAllocatorOptions small;
  small.chunk_size = link->granularity;
  small.max_small_bytes = std::min(kSmallMax, link->granularity);
  d->small_max = small.max_small_bytes;
  auto allocator = SmallAllocator::Create(small);
  if (!allocator.ok()) return allocator.status();
  d->small = std::move(*allocator);
  {
    absl::MutexLock lock(&d->mu);
    d->space.emplace(std::move(*space));
  }
  absl::MutexLock lock(&devices_mu_);
  auto it = devices_.find(static_cast<int>(dev));
  if (it != devices_.end() && it->second->client == client) {
    // Another thread won the race; give back this reservation.
    api_.MemAddressFree(d->va_base, d->va_size);
    return it->second;
  }
  d->serial = next_serial_++;
  Device* raw = d.get();
  by_serial_[raw->serial] = raw;
  all_devices_.push_back(std::move(d));
  // The current session's replaces an ended one's; a Device of a session that ended meanwhile
  // serves only this call (and later frees), and never displaces the current one's.
  if (client == client_ptr_.load(std::memory_order_acquire)) devices_[static_cast<int>(dev)] = raw;
  return raw;
}

std::optional<uint32_t> MemoryManager::GpuIndex(CUdevice dev) {
  auto d = DeviceOf(dev);
  if (!d.ok()) return std::nullopt;
  return (*d)->gpu;
}

absl::StatusOr<MemoryManager::Device*> MemoryManager::CurrentDevice() {
  CUdevice dev = 0;
  if (CUresult r = api_.CtxGetDevice(&dev); r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuCtxGetDevice", r);
  }
  return DeviceOf(dev);
}

CUresult MemoryManager::ToResult(const absl::Status& s, const char* what) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      log_->warn("{}: {}", what, std::string(s.message()));
      return CUDA_ERROR_INVALID_VALUE;
    case absl::StatusCode::kResourceExhausted:
      log_->info("{}: {}", what, std::string(s.message()));
      return CUDA_ERROR_OUT_OF_MEMORY;
    default:
      log_->error("{}: {}", what, std::string(s.message()));
      return CUDA_ERROR_OUT_OF_MEMORY;
  }
}

absl::StatusOr<std::vector<BlockLease>> MemoryManager::Lease(Device& d, bool single,
                                                             uint64_t bytes) {
  DaemonClient* client = d.client;  // never another session's
  auto leases = client->Allocate(d.gpu, single, bytes);
  if (leases.status().code() == absl::StatusCode::kResourceExhausted) {
    // Blocks we freed but have not returned yet may be what stands between us and the quota.
    ReapDeferred(/*wait=*/true);
    ReturnFreed(d);
    leases = client->Allocate(d.gpu, single, bytes);
  }
  if (leases.ok()) {
    for (const BlockLease& l : *leases) leased_bytes_ += l.bytes;
  }
  return leases;
}

absl::Status MemoryManager::MapBlocks(Device& d, CUdeviceptr va, std::vector<BlockLease>& leases) {
  uint64_t offset = 0;
  absl::Status status;
  for (BlockLease& l : leases) {
    CUmemGenericAllocationHandle h = 0;
    CUresult r = api_.MemImportFromShareableHandle(
        &h, reinterpret_cast<void*>(static_cast<uintptr_t>(l.fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(l.fd);
    l.fd = -1;
    if (r == CUDA_SUCCESS) {
      r = api_.MemMap(va + offset, l.bytes, 0, h, 0);
      api_.MemRelease(h);  // the mapping keeps the memory alive
    }
    if (r != CUDA_SUCCESS) {
      status = DriverStatus(api_, "importing and mapping a block", r);
      break;
    }
    offset += l.bytes;
  }
  for (BlockLease& l : leases) {
    if (l.fd >= 0) close(l.fd);
  }
  if (status.ok()) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = d.ordinal;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUresult r = api_.MemSetAccess(va, offset, &access, 1); r != CUDA_SUCCESS) {
      status = DriverStatus(api_, "cuMemSetAccess", r);
    }
  }
  if (!status.ok()) {
    for (uint64_t done = 0; done < offset; done += d.granularity) {
      api_.MemUnmap(va + done, d.granularity);
    }
  }
  return status;
}

absl::StatusOr<CUdeviceptr> MemoryManager::MapNew(Device& d, uint64_t bytes, bool single) {
  absl::StatusOr<uint64_t> va;
  {
    absl::MutexLock lock(&d.mu);
    if (std::optional<CUdeviceptr> cached = TakeCached(d, bytes)) return *cached;
    va = d.space->Allocate(bytes, d.granularity);
    if (!va.ok() && !d.reuse.empty()) {
      // Cached ranges hold addresses too.
      DrainCache(d);
      va = d.space->Allocate(bytes, d.granularity);
    }
  }
  if (!va.ok()) return va.status();
  auto leases = Lease(d, single, bytes);
  absl::Status s = leases.status();
  if (s.ok()) s = MapBlocks(d, *va, *leases);
  absl::MutexLock lock(&d.mu);
  if (!s.ok()) {
    d.space->Free(*va).IgnoreError();
    if (leases.ok()) {
      for (const BlockLease& l : *leases) {
        d.pending_free.push_back(l.id);
        leased_bytes_ -= l.bytes;
      }
    }
    return s;
  }
  Mapping m{bytes, {}};
  for (const BlockLease& l : *leases) m.blocks.push_back(l.id);
  d.mappings[*va] = std::move(m);
  return *va;
}

absl::StatusOr<CUdeviceptr> MemoryManager::AllocLarge(Device& d, uint64_t bytes) {
  uint64_t rounded = RoundUp(bytes, d.granularity);
  // One block per granule costs one import and one map per 2 MiB (bench/vmm_cost); one block
  // for the whole allocation costs one of each, but is placed by colour only as a whole. A
  // cached range of this size is reused whichever shape backs it.
  return MapNew(d, rounded, d.single_blocks && rounded > d.granularity);
}

absl::StatusOr<CUdeviceptr> MemoryManager::AllocSmall(Device& d, uint64_t bytes) {
  auto fast = d.small->TryAllocate(bytes, kAlignment);
  if (!fast.ok()) return fast.status();
  if (fast->has_value()) return (*fast)->address;
  // No room in the blocks held: lease one more, outside the allocator's lock.
  absl::StatusOr<CUdeviceptr> chunk = MapNew(d, d.granularity, /*single=*/false);
  if (!chunk.ok()) return chunk.status();
  auto got = d.small->AddChunkAndAllocate(*chunk, d.granularity, bytes, kAlignment);
  if (!got.ok()) return got.status();
  return got->address;
}

std::optional<CUresult> MemoryManager::Alloc(CUdeviceptr* dptr, size_t bytes) {
  if (dptr == nullptr || bytes == 0) return std::nullopt;  // the driver's own error
  absl::StatusOr<Device*> d = absl::UnavailableError("no daemon");
  absl::StatusOr<CUdeviceptr> ptr = absl::UnavailableError("no daemon");
  bool small = false;
  // A second try only if the session changed during the first (a restarted daemon took over).
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (Serving() == nullptr) return Unmanaged("cuMemAlloc");
    ReapDeferred(/*wait=*/false);
    d = CurrentDevice();
    // No current context, or a GPU the daemon does not manage: the driver answers for itself.
    if (!d.ok()) return std::nullopt;
    small = bytes <= (*d)->small_max;
    ptr = small ? AllocSmall(**d, bytes) : AllocLarge(**d, bytes);
    // A daemon that just died answers UNAVAILABLE a moment before the session's watch stream
    // says it ended: give it that moment, so the allocation follows MISSILE_NO_DAEMON.
    if (!ptr.ok() && ptr.status().code() == absl::StatusCode::kUnavailable) {
      (*d)->client->AwaitEnd(absl::Milliseconds(500));
    }
    if (ptr.ok() || (*d)->client->connected()) break;
  }
  if (!ptr.ok()) {
    // The session ended during the call: as for any allocation after that.
    if (Serving() == nullptr) return Unmanaged("cuMemAlloc");
    return ToResult(ptr.status(), "cuMemAlloc");
  }
  absl::Status s = table_.Insert(*ptr, bytes, small ? AllocationKind::kSmall : AllocationKind::kLarge,
                                 (*d)->serial);
  if (!s.ok()) return ToResult(s, "cuMemAlloc");
  allocations_.fetch_add(1, std::memory_order_relaxed);
  *dptr = *ptr;
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::AllocPitch(CUdeviceptr* dptr, size_t* pitch,
                                                  size_t width_bytes, size_t height,
                                                  unsigned element_bytes) {
  if (dptr == nullptr || pitch == nullptr || width_bytes == 0 || height == 0 ||
      !(element_bytes == 4 || element_bytes == 8 || element_bytes == 16)) {
    return std::nullopt;  // the driver reports the bad argument
  }
  if (Serving() == nullptr) return Unmanaged("cuMemAllocPitch");
  auto d = CurrentDevice();
  if (!d.ok()) return std::nullopt;
  int align = 0;
  if (api_.DeviceGetAttribute(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, (*d)->dev) !=
          CUDA_SUCCESS ||
      align <= 0) {
    align = 512;
  }
  size_t p = RoundUp(width_bytes, static_cast<uint64_t>(align));
  if (p != 0 && height > SIZE_MAX / p) return CUDA_ERROR_INVALID_VALUE;
  std::optional<CUresult> r = Alloc(dptr, p * height);
  if (r.has_value() && *r == CUDA_SUCCESS) *pitch = p;
  return r;
}

void MemoryManager::ReleaseRange(Device& d, CUdeviceptr va) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
  auto it = d.mappings.find(va);
  if (it == d.mappings.end()) return;
  Mapping m = std::move(it->second);
  d.mappings.erase(it);
  leased_bytes_ -= m.bytes;
  if (m.bytes > d.reuse_max_bytes) {
    UnmapRange(d, va, m);  // would evict everything else and then itself
    return;
  }
  d.reuse_bytes += m.bytes;
  d.reuse.push_back({va, std::move(m)});
  size_t evict = 0;
  uint64_t kept_bytes = d.reuse_bytes;
  while (d.reuse.size() - evict > kReuseMaxRanges || kept_bytes > d.reuse_max_bytes) {
    kept_bytes -= d.reuse[evict].mapping.bytes;
    UnmapRange(d, d.reuse[evict].va, d.reuse[evict].mapping);
    ++evict;
  }
  d.reuse.erase(d.reuse.begin(), d.reuse.begin() + evict);
  d.reuse_bytes = kept_bytes;
}

std::optional<CUdeviceptr> MemoryManager::TakeCached(Device& d, uint64_t bytes)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
  // Newest first: its memory is the likeliest to be warm in the GPU's caches and TLBs.
  for (auto it = d.reuse.rbegin(); it != d.reuse.rend(); ++it) {
    if (it->mapping.bytes != bytes) continue;
    CUdeviceptr va = it->va;
    d.reuse_bytes -= bytes;
    leased_bytes_ += bytes;
    d.mappings[va] = std::move(it->mapping);
    d.reuse.erase(std::next(it).base());
    return va;
  }
  return std::nullopt;
}

void MemoryManager::DrainCache(Device& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
  for (const Device::Cached& c : d.reuse) UnmapRange(d, c.va, c.mapping);
  d.reuse.clear();
  d.reuse_bytes = 0;
}

void MemoryManager::UnmapRange(Device& d, CUdeviceptr va, const Mapping& m)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
  if (CUresult r = api_.MemUnmap(va, m.bytes); r != CUDA_SUCCESS) {
    // Mapped block by block: unmap block by block.
    for (uint64_t off = 0; off < m.bytes; off += d.granularity) {
      api_.MemUnmap(va + off, d.granularity);
    }
  }
  d.space->Free(va).IgnoreError();
  for (uint64_t id : m.blocks) d.pending_free.push_back(id);
}

void MemoryManager::ReturnFreed(Device& d) {
  {
    absl::MutexLock lock(&d.mu);
    DrainCache(d);
  }
  FlushFrees(d, /*force=*/true);
}

void MemoryManager::FlushFrees(Device& d, bool force) {
  std::vector<uint64_t> ids;
  {
    absl::MutexLock lock(&d.mu);
    if (d.pending_free.empty() || (!force && d.pending_free.size() < kFreeBatchBlocks)) return;
    ids.swap(d.pending_free);
  }
  // After the session ended there is nobody to return them to: the daemon took back every
  // block of the session when it ended, or went away with them. (They never go to a later
  // session: its daemon never leased them.)
  DaemonClient* client = d.client;
  if (!client->connected()) return;
  if (absl::Status s = client->Free(d.gpu, ids); !s.ok()) {
    log_->error("returning {} blocks to missiled: {}", ids.size(), std::string(s.message()));
  }
}

absl::Status MemoryManager::FreeManaged(CUdeviceptr dptr, const AllocationTable::Entry& entry,
                                        bool sync) {
  Device* d = nullptr;
  {
    absl::MutexLock lock(&devices_mu_);
    auto it = by_serial_.find(entry.cookie);
    if (it == by_serial_.end()) return absl::InternalError("allocation of an unknown device");
    d = it->second;
  }
  // cuMemFree waits for the device before memory goes away; so must we, since unmapping
  // memory a kernel still uses would fault it.
  if (sync) api_.CtxSynchronize();
  if (entry.kind == AllocationKind::kSmall) {
    auto freed = d->small->Free(dptr);
    if (!freed.ok()) return freed.status();
    std::vector<uint64_t> chunks = d->small->TakeReleasableChunks();
    absl::MutexLock lock(&d->mu);
    for (uint64_t chunk : chunks) ReleaseRange(*d, chunk);
  } else {
    absl::MutexLock lock(&d->mu);
    ReleaseRange(*d, dptr);
  }
  if (!d->client->connected()) {
    // Nothing will reuse the cache now: unmap it, so the memory goes back to the GPU.
    ReturnFreed(*d);
  } else {
    FlushFrees(*d, /*force=*/false);
  }
  return absl::OkStatus();
}

std::optional<CUresult> MemoryManager::Free(CUdeviceptr dptr) {
  if (dptr == 0) return std::nullopt;
  auto entry = table_.Erase(dptr);
  if (!entry.ok()) return std::nullopt;  // not ours: the driver's (or its error)
  absl::Status s = FreeManaged(dptr, *entry, /*sync=*/true);
  if (!s.ok()) return ToResult(s, "cuMemFree");
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::AllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream,
                                                  bool ptsz) {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  auto is_capturing = ptsz ? api_.StreamIsCapturingPtsz : api_.StreamIsCapturing;
  if (is_capturing == nullptr || is_capturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    // Graph-owned memory: the driver allocates it at instantiation. Not Missile's.
    return std::nullopt;
  }
  // Allocating now is always safe for stream order: the memory is ready before the stream
  // reaches the allocation.
  return Alloc(dptr, bytes);
}

std::optional<CUresult> MemoryManager::FreeAsync(CUdeviceptr dptr, CUstream stream, bool ptsz) {
  auto entry = table_.Find(dptr);
  if (!entry.has_value() || entry->base != dptr) return std::nullopt;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  auto is_capturing = ptsz ? api_.StreamIsCapturingPtsz : api_.StreamIsCapturing;
  if (is_capturing != nullptr && is_capturing(stream, &capture) == CUDA_SUCCESS &&
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    log_->error("cuMemFreeAsync during stream capture of memory allocated outside it is not "
                "supported by Missile");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  // Free once the stream reaches this point: record an event, release when it completes.
  CUevent event = nullptr;
  CUresult r = api_.EventCreate(&event, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = (ptsz ? api_.EventRecordPtsz : api_.EventRecord)(event, stream);
  if (r != CUDA_SUCCESS) {
    if (event != nullptr) api_.EventDestroy(event);
    return r;
  }
  if (!table_.Erase(dptr).ok()) {
    api_.EventDestroy(event);
    return CUDA_ERROR_INVALID_VALUE;  // freed twice, concurrently
  }
  CUcontext ctx = nullptr;
  api_.CtxGetCurrent(&ctx);
  {
    absl::MutexLock lock(&deferred_mu_);
    deferred_.push_back({event, dptr, ctx});
    // Remember the entry in the event's slot: FreeManaged needs its kind and device.
    deferred_entries_[dptr] = *entry;
  }
  ReapDeferred(/*wait=*/false);
  return CUDA_SUCCESS;
}

void MemoryManager::ReapDeferred(bool wait) {
  std::vector<std::pair<CUdeviceptr, AllocationTable::Entry>> ready;
  {
    absl::MutexLock lock(&deferred_mu_);
    if (deferred_.empty()) return;
    auto keep = deferred_.begin();
    for (auto it = deferred_.begin(); it != deferred_.end(); ++it) {
      CUresult r = wait ? api_.EventSynchronize(it->event) : api_.EventQuery(it->event);
      if (r == CUDA_ERROR_NOT_READY) {
        *keep++ = *it;
        continue;
      }
      api_.EventDestroy(it->event);
      auto e = deferred_entries_.find(it->ptr);
      if (e != deferred_entries_.end()) {
        ready.emplace_back(it->ptr, e->second);
        deferred_entries_.erase(e);
      }
    }
    deferred_.erase(keep, deferred_.end());
  }
  for (const auto& [ptr, entry] : ready) {
    if (absl::Status s = FreeManaged(ptr, entry, /*sync=*/false); !s.ok()) {
      log_->error("deferred free: {}", std::string(s.message()));
    }
  }
}

std::optional<CUresult> MemoryManager::GetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return std::nullopt;
  DaemonClient* client = Serving();
  if (client == nullptr) return std::nullopt;  // the driver's answer
  auto d = CurrentDevice();
  if (!d.ok()) return std::nullopt;
  ReapDeferred(/*wait=*/false);
  // The daemon counts cached and queued frees as used; a program asking what is free expects
  // what it freed to be.
  ReturnFreed(**d);
  auto usage = (*d)->client->Usage((*d)->gpu);
  if (!usage.ok()) return ToResult(usage.status(), "cuMemGetInfo");
  uint64_t total = std::min(usage->quota_bytes, (*d)->device_total);
  *total_bytes = total;
  *free_bytes = std::min(usage->available_bytes, total);
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::TotalMem(size_t* bytes, CUdevice dev) {
  if (bytes == nullptr) return std::nullopt;
  DaemonClient* client = Serving();
  if (client == nullptr) return std::nullopt;
  auto d = DeviceOf(dev);
  if (!d.ok()) return std::nullopt;
  auto usage = (*d)->client->Usage((*d)->gpu);
  if (!usage.ok()) return ToResult(usage.status(), "cuDeviceTotalMem");
  *bytes = std::min(usage->quota_bytes, (*d)->device_total);
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::VmmCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                                 const CUmemAllocationProp* prop,
                                                 unsigned long long flags) {
  if (handle == nullptr || prop == nullptr || size == 0 || flags != 0) return std::nullopt;
  // Host memory is not VRAM; other handle types and compression the daemon's blocks lack.
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0 ||
      prop->allocFlags.compressionType != 0) {
    return std::nullopt;
  }
  if (Serving() == nullptr) return Unmanaged("cuMemCreate");
  CUdevice dev = 0;
  if (api_.DeviceGet(&dev, prop->location.id) != CUDA_SUCCESS) return std::nullopt;
  auto d = DeviceOf(dev);
  if (!d.ok()) return std::nullopt;
  if (size % (*d)->granularity != 0) return CUDA_ERROR_INVALID_VALUE;
  auto leases = Lease(**d, /*single=*/true, size);
  if (!leases.ok()) {
    if (leases.status().code() == absl::StatusCode::kUnavailable) {
      (*d)->client->AwaitEnd(absl::Milliseconds(500));
    }
    if (Serving() == nullptr) return Unmanaged("cuMemCreate");
    return ToResult(leases.status(), "cuMemCreate");
  }
  BlockLease& l = (*leases)[0];
  CUmemGenericAllocationHandle h = 0;
  CUresult r = api_.MemImportFromShareableHandle(
      &h, reinterpret_cast<void*>(static_cast<uintptr_t>(l.fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(l.fd);
  if (r != CUDA_SUCCESS) {
    absl::MutexLock lock(&(*d)->mu);
    (*d)->pending_free.push_back(l.id);
    leased_bytes_ -= l.bytes;
    return r;
  }
  {
    absl::MutexLock lock(&vmm_mu_);
    vmm_[h] = VmmHandle{(*d)->gpu, l.id, l.bytes};
    vmm_devices_[h] = *d;
  }
  allocations_.fetch_add(1, std::memory_order_relaxed);
  *handle = h;
  return CUDA_SUCCESS;
}

void MemoryManager::MaybeReturnVmm(CUmemGenericAllocationHandle handle) {
  VmmHandle v;
  Device* d = nullptr;
  {
    absl::MutexLock lock(&vmm_mu_);
    auto it = vmm_.find(handle);
    if (it == vmm_.end() || it->second.refs > 0 || it->second.mappings > 0) return;
    v = it->second;
    d = vmm_devices_[handle];
    vmm_.erase(it);
    vmm_devices_.erase(handle);
  }
  if (d == nullptr) return;
  {
    absl::MutexLock lock(&d->mu);
    d->pending_free.push_back(v.block);
    leased_bytes_ -= v.bytes;
  }
  FlushFrees(*d, /*force=*/false);
}

std::optional<CUresult> MemoryManager::VmmRelease(CUmemGenericAllocationHandle handle) {
  {
    absl::MutexLock lock(&vmm_mu_);
    auto it = vmm_.find(handle);
    if (it == vmm_.end()) return std::nullopt;
  }
  CUresult r = api_.MemRelease(handle);
  if (r != CUDA_SUCCESS) return r;
  {
    absl::MutexLock lock(&vmm_mu_);
    auto it = vmm_.find(handle);
    if (it != vmm_.end()) --it->second.refs;
  }
  MaybeReturnVmm(handle);
  return CUDA_SUCCESS;
}

void MemoryManager::VmmRetained(CUmemGenericAllocationHandle handle) {
  absl::MutexLock lock(&vmm_mu_);
  auto it = vmm_.find(handle);
  if (it != vmm_.end()) ++it->second.refs;
}

void MemoryManager::VmmMapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle) {
  absl::MutexLock lock(&vmm_mu_);
  auto it = vmm_.find(handle);
  if (it == vmm_.end()) return;
  ++it->second.mappings;
  vmm_maps_[ptr] = {handle, size};
}

void MemoryManager::VmmUnmapped(CUdeviceptr ptr, size_t size) {
  std::vector<CUmemGenericAllocationHandle> touched;
  {
    absl::MutexLock lock(&vmm_mu_);
    for (auto it = vmm_maps_.lower_bound(ptr); it != vmm_maps_.end() && it->first < ptr + size;) {
      auto h = vmm_.find(it->second.first);
      if (h != vmm_.end()) {
        --h->second.mappings;
        touched.push_back(it->second.first);
      }
      it = vmm_maps_.erase(it);
    }
  }
  for (auto h : touched) MaybeReturnVmm(h);
}

}  // namespace missile::shim

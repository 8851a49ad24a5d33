// Fuzzes the copy channel as the daemon reads it: the shared region (common/copy_channel.h) is
// the tenant's to write, so every word of it is fuzzed, and CopyArbiter
// (daemon/copy_arbiter.h) reads it. Per input, an arbiter without its thread (fresh per input)
// opens a channel for an LS and a BE session and the input is a series of operations, one byte
// each plus its arguments: the tenants post well-formed or malformed requests, mark them
// arrived, report chunks done, take the grants the daemon lends ahead (or claim ones it did
// not lend), scribble any word of their regions, move the request heads anywhere; the daemon makes passes, changes policy, reports usage, closes and reopens
// channels. Nothing may crash, leak (memory, descriptors) or hang, whatever the region holds.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "daemon/copy_arbiter.h"
#include "fuzz_daemon.h"
#include "missile/common/copy_channel.h"

namespace missile::daemon::fuzz {
namespace {

using copych::kGates;
using copych::Region;

constexpr uint64_t kChunk = 2 << 20;
constexpr uint64_t kBeChunk = 8 << 20;

struct Tenant {
  uint64_t session = 0;
  TenantClass cls = TenantClass::kBestEffort;
  Region* region = nullptr;
  int bell = -1;

  void Close() {
    if (region != nullptr) munmap(region, copych::kRegionBytes);
    if (bell >= 0) close(bell);
    region = nullptr;
    bell = -1;
  }
};

bool Open(CopyArbiter* arbiter, Tenant* t) {
  auto fds = arbiter->OpenChannel(t->session, t->cls, 1024);
  if (!fds.ok()) return false;
  void* p = mmap(nullptr, copych::kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds->first, 0);
  close(fds->first);
  t->bell = fds->second;
  if (p == MAP_FAILED) {
    fprintf(stderr, "fuzz: cannot map the copy channel\n");
    abort();
  }
  t->region = static_cast<Region*>(p);
  return true;
}

uint64_t ChunkOf(uint8_t pick, Bytes* in) {
  switch (pick % 4) {
    case 0: return kChunk;
    case 1: return kBeChunk;
    case 2: return in->Get<uint64_t>();
    default: return kChunk / 2;
  }
}

// One operation of the input on tenant `t`.
void Step(CopyArbiter* arbiter, Tenant* t, uint8_t op, Bytes* in) {
  const int d = (op >> 4) & 1;
  switch (op % 10) {
    case 0: {  // post a request
      if (t->region == nullptr) return;
      copych::Ring& r = t->region->ring[d];
      uint64_t head = r.request_head.load();
      copych::RequestEntry& e = r.requests[head % kGates];
      e.bytes = in->Get<uint32_t>() % (64u << 20);
      e.chunk_bytes = ChunkOf(in->Get<uint8_t>(), in);
      e.first = in->Get<uint16_t>() % (kGates + 16);
      // Marked as started on a grant lent ahead: taken first (as the shim does), or not (a
      // lying tenant), or with flags the daemon does not know.
      const uint8_t mark = in->Get<uint8_t>();
      if (mark & 1) r.head_start.exchange(0);
      e.flags = (mark & 2) ? copych::kRequestStarted : (mark & 4) ? mark : 0;
      r.request_head.store(head + 1);
      char one = 1;
      (void)!send(t->bell, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      return;
    }
    case 1: {  // the copy reached the head of its stream
      if (t->region == nullptr) return;
      t->region->ring[d].gates.arrived[in->Get<uint16_t>() % kGates].store(1);
      return;
    }
    case 2: {  // a chunk is done (or any value the GPU or tenant writes there)
      if (t->region == nullptr) return;
      const uint16_t gate = in->Get<uint16_t>() % kGates;
      t->region->ring[d].gates.done[gate].store(in->Get<uint8_t>() % 4);
      return;
    }
    case 3: {  // every granted chunk is done
      if (t->region == nullptr) return;
      copych::Gates& g = t->region->ring[d].gates;
      for (uint32_t i = 0; i < kGates; ++i) {
        if (g.go[i].load() != 0 && g.done[i].load() == 0) g.done[i].store(copych::kDoneCopied);
      }
      return;
    }
    case 4: {  // a word anywhere in the region
      if (t->region == nullptr) return;
      const uint32_t offset = in->Get<uint32_t>() % (copych::kRegionBytes / 4) * 4;
      const uint32_t value = in->Get<uint32_t>();
      memcpy(reinterpret_cast<char*>(t->region) + offset, &value, sizeof(value));
      return;
    }
    case 5: {  // the request head anywhere
      if (t->region == nullptr) return;
      t->region->ring[d].request_head.store(in->Get<uint64_t>());
      return;
    }
    case 6:
      arbiter->SetPolicy(t->session, (op & 0x20) ? TenantClass::kLatencySensitive
                                                  : TenantClass::kBestEffort,
                         in->Get<uint16_t>() % 100000);
      return;
    case 7:
      (void)arbiter->Usage();
      return;
    case 8:  // the session ends, and may open a channel again
      arbiter->CloseChannel(t->session);
      t->Close();
      if (op & 0x20) Open(arbiter, t);
      return;
    default:
      arbiter->PollOnce();
      return;
  }
}

}  // namespace
}  // namespace missile::daemon::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace missile::daemon::fuzz;
  static const bool silenced = (SilenceDaemonLogs(), true);
  (void)silenced;
  const int fds_before = OpenDescriptors();
  {
    missile::daemon::CopyArbiter::Options options;
    options.scheduler.chunk_bytes = kChunk;
    options.scheduler.be_chunk_bytes = kBeChunk;
    options.scheduler.max_inflight_chunks_total = 4;
    options.scheduler.max_inflight_chunks_per_tenant = 2;
    options.start_thread = false;
    auto arbiter = missile::daemon::CopyArbiter::Create(options);
    if (!arbiter.ok()) abort();
    Tenant tenants[2];
    tenants[0].session = 1;
    tenants[0].cls = missile::TenantClass::kLatencySensitive;
    tenants[1].session = 2;
    for (Tenant& t : tenants) Open(arbiter->get(), &t);
    Bytes in(data, size);
    for (int steps = 0; !in.empty() && steps < 4096; ++steps) {
      const uint8_t op = in.Get<uint8_t>();
      Step(arbiter->get(), &tenants[(op >> 7) & 1], op, &in);
    }
    (*arbiter)->PollOnce();
    arbiter->reset();
    for (Tenant& t : tenants) t.Close();
  }
  const int fds_after = OpenDescriptors();
  if (fds_after != fds_before) {
    fprintf(stderr, "fuzz: %d descriptors open before the input, %d after\n", fds_before,
            fds_after);
    abort();
  }
  return 0;
}

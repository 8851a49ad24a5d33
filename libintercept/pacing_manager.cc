// PacingManager (pacer.h): one Pacer per GPU and daemon session, opened at the first work
// item on that GPU, and the exit report's pacing lines.
#include <string>

#include "pacer.h"
#include "session_manager.h"

namespace missile::shim {

Pacer* PacingManager::Current() {
  SessionClient* session = sessions_->Client();
  if (session == nullptr) return nullptr;
  CUdevice dev = 0;
  if (api_.CtxGetDevice == nullptr || api_.CtxGetDevice(&dev) != CUDA_SUCCESS) return nullptr;
  const int key = static_cast<int>(dev);
  auto known = [&]() -> std::optional<Pacer*> {
    absl::MutexLock lock(&mu_);
    auto it = pacers_.find(key);
    if (it != pacers_.end() && it->second.session == session) return it->second.pacer.get();
    return std::nullopt;
  };
  if (std::optional<Pacer*> p = known()) return *p;
  if (!session->connected()) return nullptr;
  // One open at a time: a lanes page can be mapped writable once only (it is sealed then), so
  // a second thread must find the first one's pacer, not open the page again.
  absl::MutexLock open_lock(&open_mu_);
  if (std::optional<Pacer*> p = known()) return *p;
  absl::StatusOr<std::unique_ptr<Pacer>> opened = absl::UnavailableError("no daemon GPU");
  if (absl::StatusOr<const GpuLink*> link = sessions_->LinkOf(session, dev); link.ok()) {
    const uint32_t gpu = (*link)->index;
    absl::StatusOr<std::pair<int, int>> fds = session->OpenPacing(gpu);
    if (fds.ok()) {
      auto open_peer = [session, gpu](uint32_t slot, uint64_t epoch) {
        return session->OpenPeerLanes(gpu, slot, epoch);
      };
      opened = Pacer::Open(fds->first, fds->second, session->session_id(), session, open_peer,
                           api_, log_);
    } else {
      opened = fds.status();
    }
  }
  absl::MutexLock lock(&mu_);
  Slot& slot = pacers_[key];
  if (slot.pacer != nullptr) retired_.push_back(std::move(slot.pacer));
  slot.session = session;
  if (!opened.ok()) {
    if (session->connected()) {
      log_->warn("GPU work on device {} is not paced: {}", key,
                 std::string(opened.status().message()));
    }
    return nullptr;
  }
  slot.pacer = std::move(*opened);
  slot.pacer->AttachMasker(masker_, dev);
  return slot.pacer.get();
}

std::string PacingManager::Summary() {
  uint64_t marked = 0, held = 0, held_ns = 0, by[Pacer::kReasons] = {};
  absl::MutexLock lock(&mu_);
  auto add = [&](const Pacer* p) {
    if (p == nullptr) return;
    marked += p->marked();
    held += p->held();
    held_ns += p->held_ns();
    for (size_t r = 0; r < Pacer::kReasons; ++r) {
      by[r] += p->held_by_ns(static_cast<pacing::Verdict>(r));
    }
  };
  for (const auto& [dev, slot] : pacers_) add(slot.pacer.get());
  for (const auto& p : retired_) add(p.get());
  return std::to_string(marked) + " work items marked, " + std::to_string(held) + " held for " +
         std::to_string(held_ns / 1000000) + " ms in all (LS busy " +
         std::to_string(by[static_cast<size_t>(pacing::Verdict::kWaitLs)] / 1000000) +
         " ms, window " +
         std::to_string(by[static_cast<size_t>(pacing::Verdict::kWaitWindow)] / 1000000) +
         " ms, share " +
         std::to_string(by[static_cast<size_t>(pacing::Verdict::kWaitShare)] / 1000000) + " ms)";
}

bool PacingManager::HostPacedCopies() {
  Pacer* p = Current();
  // Only next to an LS tenant: a BE copy's gate waiting on the GPU would make its context
  // runnable and cost the LS a time slice. With BE tenants only there is nobody to protect, and
  // the copies stay asynchronous for the program (their gates wait on its stream).
  return p != nullptr && p->best_effort() && p->Paces() && p->LsTenantsPresent();
}

}  // namespace missile::shim

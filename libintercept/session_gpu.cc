#include "session_gpu.h"

#include <string>
#include <utility>
#include <vector>

#include "session_manager.h"

namespace missile::shim {

CopyGate* SessionGpu::Gate() {
  if (gate_tried_.load(std::memory_order_acquire)) {
    CopyGate* gate = gate_ptr_.load(std::memory_order_acquire);
    if (gate == nullptr) return nullptr;  // failed in this session
    if (session_->connected()) return gate;
  }
  // An ended session: say so once and watch for a restarted daemon, as an allocation would.
  if (!session_->connected()) {
    sessions_->Serving();
    return nullptr;
  }
  absl::MutexLock lock(&gate_mu_);
  if (gate_tried_.load(std::memory_order_relaxed)) return gate_.get();
  absl::StatusOr<const GpuLink*> link = sessions_->LinkOf(session_, device_);
  absl::StatusOr<std::unique_ptr<CopyGate>> opened = absl::UnavailableError("no daemon");
  if (link.ok()) {
    auto fds = session_->OpenCopyChannel((*link)->index);
    if (fds.ok()) {
      // Open owns the descriptors from here, and closes them itself if it fails.
      SessionClient* session = session_;
      opened = CopyGate::Open(fds->first, fds->second, api_, log_,
                              [session] { return session->connected(); });
    } else {
      opened = fds.status();
    }
  }
  // Ended and replaced meanwhile: nothing is kept, and this object is not asked again.
  if (session_ != sessions_->Client()) return nullptr;
  if (!opened.ok()) {
    if (session_->connected() && opened.status().code() != absl::StatusCode::kAlreadyExists) {
      log_->warn("PCIe copies on device {} are not scheduled: {}", static_cast<int>(device_),
                 std::string(opened.status().message()));
    }
    gate_tried_.store(true, std::memory_order_release);
    return nullptr;
  }
  gate_ = std::move(*opened);
  gate_ptr_.store(gate_.get(), std::memory_order_release);
  gate_tried_.store(true, std::memory_order_release);
  return gate_.get();
}

Pacer* SessionGpu::pacer() {
  if (pacer_tried_.load(std::memory_order_acquire)) {
    return pacer_ptr_.load(std::memory_order_acquire);
  }
  if (!session_->connected()) return nullptr;
  absl::MutexLock lock(&pacer_mu_);
  if (pacer_tried_.load(std::memory_order_relaxed)) return pacer_.get();
  absl::StatusOr<std::unique_ptr<Pacer>> opened = absl::UnavailableError("no daemon GPU");
  if (absl::StatusOr<const GpuLink*> link = sessions_->LinkOf(session_, device_); link.ok()) {
    const uint32_t gpu = (*link)->index;
    absl::StatusOr<std::pair<int, int>> fds = session_->OpenPacing(gpu);
    if (fds.ok()) {
      SessionClient* session = session_;
      auto open_peer = [session, gpu](uint32_t slot, uint64_t epoch) {
        return session->OpenPeerLanes(gpu, slot, epoch);
      };
      opened = Pacer::Open(fds->first, fds->second, session_->session_id(), session_, open_peer,
                           api_, log_);
    } else {
      opened = fds.status();
    }
  }
  if (!opened.ok()) {
    if (session_->connected()) {
      log_->warn("GPU work on device {} is not paced: {}", static_cast<int>(device_),
                 std::string(opened.status().message()));
    }
    pacer_tried_.store(true, std::memory_order_release);
    return nullptr;
  }
  pacer_ = std::move(*opened);
  pacer_->AttachMasker(masker_, device_);  // before any other thread sees it
  if (sessions_->config().ls_marks_every) pacer_->MarkEveryLsItem();
  pacer_ptr_.store(pacer_.get(), std::memory_order_release);
  pacer_tried_.store(true, std::memory_order_release);
  return pacer_.get();
}

absl::StatusOr<GpuMemory*> SessionGpu::Memory(MemoryFactory make) {
  if (GpuMemory* made = memory_ptr_.load(std::memory_order_acquire)) return made;
  GpuMemory* made = nullptr;
  {
    absl::MutexLock lock(&memory_mu_);
    if (memory_ != nullptr) return memory_.get();
    absl::StatusOr<const GpuLink*> link = sessions_->LinkOf(session_, device_);
    if (!link.ok()) return link.status();
    // A session that ended meanwhile gets no memory (it could never hold any).
    if (!session_->connected()) return absl::UnavailableError("the session with missiled ended");
    absl::StatusOr<std::unique_ptr<GpuMemory>> created = make(**link);
    if (!created.ok()) return created.status();
    memory_ = std::move(*created);
    made = memory_.get();
    memory_ptr_.store(made, std::memory_order_release);
  }
  // The same daemon session served by an earlier client (the daemon kept it through a stall):
  // that client's memory of this device returns its blocks through this one from now on.
  std::vector<GpuMemory*> adopted;
  sessions_->ForEachGpu([&](const SessionGpu& g) {
    SessionClient* was = g.session();
    if (g.memory() != nullptr && g.device() == device_ && was != session_ && !was->connected() &&
        !was->instance().empty() && was->session_id() == session_->session_id() &&
        was->instance() == session_->instance()) {
      adopted.push_back(g.memory());
    }
  });
  for (GpuMemory* old : adopted) old->AdoptedBy(session_);  // may send a Free: no lock held
  return made;
}

bool SessionGpu::HostPacedCopies() {
  Pacer* p = pacer();
  // Only next to an LS tenant: a BE copy's gate waiting on the GPU would make its context
  // runnable and cost the LS a time slice. With BE tenants only there is nobody to protect, nor
  // once every LS tenant's budget lets the BE go unheld (its last step), and the copies stay
  // asynchronous for the program (their gates wait on its stream).
  return p != nullptr && p->best_effort() && p->Paces() && p->LsTenantsPresent() &&
         !p->ReleasedByLs();
}

bool WorkCall::Capturing(CUstream stream, bool ptsz) {
  const bool own = stream == stream_ && ptsz == ptsz_;
  if (own && capturing_.has_value()) return *capturing_;
  auto query = ptsz ? api_.StreamIsCapturingPtsz : api_.StreamIsCapturing;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const bool capturing = query == nullptr || query(stream, &status) != CUDA_SUCCESS ||
                         status != CU_STREAM_CAPTURE_STATUS_NONE;
  if (own) capturing_ = capturing;
  return capturing;
}

}  // namespace missile::shim

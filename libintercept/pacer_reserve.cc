// The LS reserve of TPCs on MPS, the pacer's part (pacer.h: BeMask; tpc_mask.h: the
// mechanism), and whether the pacer's process is an MPS client at all (AttachMasker).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "pacer.h"

namespace missile::shim {

std::optional<pacing::TpcMask> Pacer::BeMask() {
  if (masker_ == nullptr || !best_effort()) return std::nullopt;
  const uint32_t reserve = dir().policy.ls_reserve_tpcs.load(std::memory_order_relaxed);
  if (reserve == 0 || !LsTenantsPresent() ||
      entry().session.load(std::memory_order_relaxed) != session_) {
    return std::nullopt;
  }
  uint32_t state = reserve_state_.load(std::memory_order_acquire);
  if (state == pacingreg::kReserveOff) state = ProbeReserve();
  if (state != pacingreg::kReserveActive) return std::nullopt;
  const uint32_t kept = std::min<uint32_t>(reserve, static_cast<uint32_t>(masks_.size()) - 1);
  if (slot_->reserve_tpcs.load(std::memory_order_relaxed) != kept) {
    slot_->reserve_tpcs.store(kept, std::memory_order_relaxed);
  }
  return masks_[kept];
}

pacingreg::ReserveState Pacer::ProbeReserve() {
  absl::MutexLock lock(&reserve_mu_);
  if (const uint32_t known = reserve_state_.load(std::memory_order_relaxed);
      known != pacingreg::kReserveOff) {
    return static_cast<pacingreg::ReserveState>(known);
  }
  pacingreg::ReserveState state = pacingreg::kReserveUnavailable;
  if (!mps_client_) {
    state = pacingreg::kReserveNotMps;
    reserve_note_ = "time-sliced (not an MPS client): no reserve needed";
  } else if (absl::StatusOr<const pacing::TpcMap*> map = masker_->MapFor(device_); !map.ok()) {
    reserve_note_ = absl::StrCat("unavailable: ", map.status().message());
  } else {
    for (uint32_t r = 0; r < (*map)->live.size(); ++r) {
      masks_.push_back(pacing::ReserveMask(**map, r));
    }
    state = pacingreg::kReserveActive;
    reserve_note_ = pacing::DescribeTpcMap(**map);
  }
  slot_->reserve_state.store(state, std::memory_order_relaxed);  // for missilectl
  reserve_state_.store(state, std::memory_order_release);
  return state;
}

void Pacer::AttachMasker(TpcMasker* masker, CUdevice device) {
  masker_ = masker;
  device_ = device;
  int mps = 0;
  mps_client_ =
      api_->DeviceGetAttribute != nullptr &&
      api_->DeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, device_) == CUDA_SUCCESS &&
      mps != 0;
  slot_->mps_client.store(mps_client_ ? 1 : 0, std::memory_order_relaxed);  // for missilectl
}

std::string Pacer::reserve_note() const {
  absl::MutexLock lock(&reserve_mu_);
  return reserve_note_;
}

}  // namespace missile::shim

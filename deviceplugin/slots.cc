#include "slots.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace missile::deviceplugin {

namespace {

constexpr size_t kMaxIdLength = 63;

bool IdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

}  // namespace

absl::StatusOr<std::vector<Slot>> BuildSlots(const std::vector<GpuRef>& gpus, TenantClass cls,
                                             uint32_t slots_per_gpu) {
  std::vector<Slot> out;
  std::set<std::string> seen;
  for (const GpuRef& gpu : gpus) {
    if (gpu.uuid.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", gpu.index, " has no UUID"));
    }
    if (!std::all_of(gpu.uuid.begin(), gpu.uuid.end(), IdChar)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ", gpu.index, ": UUID has characters a device ID may not hold"));
    }
    if (!seen.insert(gpu.uuid).second) {
      return absl::InvalidArgumentError(absl::StrCat("two GPUs have the UUID ", gpu.uuid));
    }
    for (uint32_t n = 0; n < slots_per_gpu; ++n) {
      std::string id = absl::StrCat(gpu.uuid, "-", TenantClassName(cls), "-", n);
      if (id.size() > kMaxIdLength) {
        return absl::InvalidArgumentError(absl::StrCat("device ID '", id, "' is longer than ",
                                                       kMaxIdLength, " characters"));
      }
      out.push_back(Slot{std::move(id), gpu, n});
    }
  }
  return out;
}

const Slot* FindSlot(const std::vector<Slot>& slots, const std::string& id) {
  for (const Slot& slot : slots) {
    if (slot.id == id) return &slot;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> PreferSlots(const std::vector<Slot>& slots,
                                                     const std::vector<std::string>& available,
                                                     const std::vector<std::string>& must_include,
                                                     int size) {
  if (size <= 0) return absl::InvalidArgumentError(absl::StrCat("allocation size ", size));
  std::set<std::string> avail;
  // Available slots per GPU index, in slot order.
  std::map<uint32_t, std::vector<const Slot*>> by_gpu;
  for (const std::string& id : available) {
    const Slot* slot = FindSlot(slots, id);
    if (slot == nullptr) return absl::InvalidArgumentError("unknown device '" + id + "'");
    if (!avail.insert(id).second) return absl::InvalidArgumentError("device '" + id + "' repeated");
    by_gpu[slot->gpu.index].push_back(slot);
  }
  if (static_cast<size_t>(size) > avail.size() || static_cast<size_t>(size) < must_include.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot choose ", size, " of ", avail.size(),
                                                   " available devices with ",
                                                   must_include.size(), " required"));
  }
  std::vector<std::string> chosen;
  std::set<std::string> taken;
  std::set<uint32_t> preferred_gpus;
  for (const std::string& id : must_include) {
    if (avail.count(id) == 0) {
      return absl::InvalidArgumentError("required device '" + id + "' is not available");
    }
    if (!taken.insert(id).second) return absl::InvalidArgumentError("device '" + id + "' repeated");
    chosen.push_back(id);
    preferred_gpus.insert(FindSlot(slots, id)->gpu.index);
  }
  std::vector<uint32_t> order;
  for (const auto& [index, list] : by_gpu) order.push_back(index);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const bool pa = preferred_gpus.count(a) > 0, pb = preferred_gpus.count(b) > 0;
    if (pa != pb) return pa;
    return by_gpu[a].size() > by_gpu[b].size();
  });
  for (uint32_t index : order) {
    for (const Slot* slot : by_gpu[index]) {
      if (chosen.size() == static_cast<size_t>(size)) return chosen;
      if (taken.insert(slot->id).second) chosen.push_back(slot->id);
    }
  }
  return chosen;
}

}  // namespace missile::deviceplugin

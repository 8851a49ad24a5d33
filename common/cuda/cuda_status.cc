#include "missile/common/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace missile {
namespace {

bool MeansNoGpu(CUresult r) {
  switch (r) {
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
      return true;
    default:
      return false;
  }
}

// Debian's Abseil has its own string_view: StrCat takes std::string_view only through this.
absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

absl::Status CudaStatus(std::string_view what, CUresult r, const CudaStatusOptions& options) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (options.describe && cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  if (options.name_stub_library && name == nullptr && r == CUDA_ERROR_STUB_LIBRARY) {
    name = "CUDA_ERROR_STUB_LIBRARY";
    text = options.describe ? "the CUDA toolkit's stub libcuda was loaded, not a GPU driver"
                            : nullptr;
  }
  const std::string code = std::to_string(static_cast<int>(r));
  std::string message = absl::StrCat(AsAbsl(what), " failed: ");
  if (options.describe) {
    // "NAME (description)", or "CUDA error <code>" when the driver cannot name it.
    absl::StrAppend(&message, name != nullptr ? name : absl::StrCat("CUDA error ", code),
                    text != nullptr ? absl::StrCat(" (", text, ")") : "");
  } else {
    absl::StrAppend(&message, name != nullptr ? name : "CUDA error", " (", code, ")");
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(message);
  if (options.unavailable_when_no_gpu && MeansNoGpu(r)) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

}  // namespace missile

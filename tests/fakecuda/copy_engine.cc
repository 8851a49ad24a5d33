#include "copy_engine.h"

#include <cstring>

#include "fake_state.h"

namespace fakecuda {
namespace {

// The address of the first byte and the span of one side of a 3D copy.
struct Side {
  uintptr_t base = 0;
  size_t span = 0;
  size_t pitch = 0;
  size_t slice = 0;  // bytes between planes
};

bool Mul(size_t a, size_t b, size_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool Add(size_t a, size_t b, size_t* out) { return !__builtin_add_overflow(a, b, out); }

// Fills `side` for a copy of width x height x depth; false if the description is invalid.
bool Describe(uintptr_t ptr, size_t x, size_t y, size_t z, size_t pitch, size_t height_of_plane,
              size_t width, size_t height, size_t depth, Side* side) {
  if (height == 1 && depth == 1 && pitch == 0) pitch = x + width;  // one row needs no pitch
  if (x > pitch || width > pitch - x) return false;  // "pitch >= WidthInBytes + XInBytes"
  // Planes are height_of_plane rows apart ("Height >= Height + Y"); a copy of one plane at z = 0
  // may leave it unset.
  const bool planes = depth > 1 || z > 0;
  if (planes && (y > height_of_plane || height > height_of_plane - y)) return false;
  size_t slice = 0;
  size_t offset = 0;
  size_t span = 0;
  size_t tmp = 0;
  if (!Mul(pitch, planes ? height_of_plane : height, &slice)) return false;
  // offset = z * slice + y * pitch + x
  if (!Mul(z, slice, &offset) || !Mul(y, pitch, &tmp) || !Add(offset, tmp, &offset) ||
      !Add(offset, x, &offset)) {
    return false;
  }
  // span = (depth - 1) * slice + (height - 1) * pitch + width
  if (!Mul(depth - 1, slice, &span) || !Mul(height - 1, pitch, &tmp) || !Add(span, tmp, &span) ||
      !Add(span, width, &span)) {
    return false;
  }
  if (ptr + offset < ptr) return false;
  side->base = ptr + offset;
  side->span = span;
  side->pitch = pitch;
  side->slice = slice;
  return true;
}

}  // namespace

CopyEngine::CopyEngine(FakeState* state) : state_(state) {}

CUresult CopyEngine::CheckEndpoint(uintptr_t addr, size_t span, bool write,
                                   bool declared_device) const {
  if (addr == 0) return CUDA_ERROR_INVALID_VALUE;
  AddressSpace& as = state_->address_space();
  if (!declared_device && !as.Find(addr).has_value()) return CUDA_SUCCESS;  // pageable host
  return as.CheckAccess(addr, span, write);
}

CUresult CopyEngine::Submit(uintptr_t dst, uintptr_t src, size_t bytes, Issue issue,
                            std::function<void()> op) {
  std::shared_ptr<Stream> stream;
  if (CUresult r = state_->streams().Resolve(issue.stream, issue.mode, &stream);
      r != CUDA_SUCCESS) {
    return r;
  }
  int dst_device = -1;
  int src_device = -1;
  const MemClass dst_class = state_->address_space().Classify(dst, &dst_device);
  const MemClass src_class = state_->address_space().Classify(src, &src_device);
  const bool dst_on_device = dst_class == MemClass::kDevice;
  const bool src_on_device = src_class == MemClass::kDevice;
  if (dst_on_device != src_on_device) {
    const Direction dir = dst_on_device ? Direction::kHostToDevice : Direction::kDeviceToHost;
    const int device = dst_on_device ? dst_device : src_device;
    const PcieLink* link = &state_->link();
    op = [link, device, dir, bytes, copy = std::move(op)] {
      link->Transfer(device, dir, bytes, copy);
    };
  }
  if (!issue.async) {
    stream->RunAndWait(std::move(op));
    return CUDA_SUCCESS;
  }
  // Recorded while the stream captures; otherwise pageable memory makes the copy synchronous.
  const bool pageable = dst_class == MemClass::kPageable || src_class == MemClass::kPageable;
  return stream->Submit(std::move(op), CU_GRAPH_NODE_TYPE_MEMCPY, /*wait=*/pageable);
}

CUresult CopyEngine::Copy(uintptr_t dst, bool dst_device, uintptr_t src, bool src_device,
                          size_t bytes, Issue issue) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (dst + bytes < dst || src + bytes < src) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckEndpoint(dst, bytes, /*write=*/true, dst_device); r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = CheckEndpoint(src, bytes, /*write=*/false, src_device); r != CUDA_SUCCESS) {
    return r;
  }
  return Submit(dst, src, bytes, issue, [dst, src, bytes] {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  });
}

CUDA_MEMCPY3D CopyEngine::From2D(const CUDA_MEMCPY2D& c) {
  CUDA_MEMCPY3D d{};
  d.srcXInBytes = c.srcXInBytes;
  d.srcY = c.srcY;
  d.srcMemoryType = c.srcMemoryType;
  d.srcHost = c.srcHost;
  d.srcDevice = c.srcDevice;
  d.srcArray = c.srcArray;
  d.srcPitch = c.srcPitch;
  d.srcHeight = c.Height;
  d.dstXInBytes = c.dstXInBytes;
  d.dstY = c.dstY;
  d.dstMemoryType = c.dstMemoryType;
  d.dstHost = c.dstHost;
  d.dstDevice = c.dstDevice;
  d.dstArray = c.dstArray;
  d.dstPitch = c.dstPitch;
  d.dstHeight = c.Height;
  d.WidthInBytes = c.WidthInBytes;
  d.Height = c.Height;
  d.Depth = 1;
  return d;
}

CUresult CopyEngine::CreateArray(Context* ctx, const CUDA_ARRAY_DESCRIPTOR* desc, CUarray* out) {
  if (desc == nullptr || out == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned size = 0;
  switch (desc->Format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      size = 1;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      size = 2;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      size = 4;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (desc->NumChannels != 1 && desc->NumChannels != 2 && desc->NumChannels != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  FakeArray a;
  a.element = size * desc->NumChannels;
  a.rows = desc->Height == 0 ? 1 : desc->Height;
  size_t bytes = 0;
  if (!Mul(desc->Width, a.element, &a.row_bytes) || !Mul(a.row_bytes, a.rows, &bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = state_->memory().Alloc(ctx, bytes, &a.base); r != CUDA_SUCCESS) return r;
  MutexLock lock(&arrays_mu_);
  const uintptr_t handle = next_array_;
  next_array_ += 0x10;
  arrays_[handle] = a;
  *out = reinterpret_cast<CUarray>(handle);
  return CUDA_SUCCESS;
}

CUresult CopyEngine::DestroyArray(CUarray array) {
  CUdeviceptr base = 0;
  {
    MutexLock lock(&arrays_mu_);
    auto it = arrays_.find(reinterpret_cast<uintptr_t>(array));
    if (it == arrays_.end()) return CUDA_ERROR_INVALID_HANDLE;
    base = it->second.base;
    arrays_.erase(it);
  }
  return state_->memory().Free(base);
}

std::optional<CopyEngine::FakeArray> CopyEngine::FindArray(CUarray array) const {
  MutexLock lock(&arrays_mu_);
  auto it = arrays_.find(reinterpret_cast<uintptr_t>(array));
  if (it == arrays_.end()) return std::nullopt;
  return it->second;
}

CUresult CopyEngine::CopyArray(CUarray array, size_t offset, uintptr_t host, size_t bytes,
                               bool to_array, Issue issue) {
  std::optional<FakeArray> a = FindArray(array);
  if (!a.has_value()) return CUDA_ERROR_INVALID_VALUE;
  size_t end = 0;
  if (!Add(offset, bytes, &end) || end > a->row_bytes * a->rows) return CUDA_ERROR_INVALID_VALUE;
  const uintptr_t at = a->base + offset;
  return to_array ? Copy(at, true, host, false, bytes, issue) : Copy(host, false, at, true, bytes, issue);
}

CUresult CopyEngine::Copy3D(const CUDA_MEMCPY3D& in, Issue issue) {
  CUDA_MEMCPY3D c = in;
  // An array side becomes device memory with the array's own pitch and plane height.
  auto array_side = [this, &c](CUarray array, size_t x, size_t y, size_t z, CUmemorytype* type,
                               CUdeviceptr* device, size_t* pitch, size_t* plane_rows) {
    std::optional<FakeArray> a = FindArray(array);
    if (!a.has_value() || x % a->element != 0 || c.WidthInBytes % a->element != 0 || z != 0 ||
        c.Depth > 1 || x + c.WidthInBytes > a->row_bytes || y + c.Height > a->rows) {
      return false;
    }
    *type = CU_MEMORYTYPE_DEVICE;
    *device = a->base;
    *pitch = a->row_bytes;
    *plane_rows = a->rows;
    return true;
  };
  if (c.srcMemoryType == CU_MEMORYTYPE_ARRAY &&
      !array_side(c.srcArray, c.srcXInBytes, c.srcY, c.srcZ, &c.srcMemoryType, &c.srcDevice,
                  &c.srcPitch, &c.srcHeight)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (c.dstMemoryType == CU_MEMORYTYPE_ARRAY &&
      !array_side(c.dstArray, c.dstXInBytes, c.dstY, c.dstZ, &c.dstMemoryType, &c.dstDevice,
                  &c.dstPitch, &c.dstHeight)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto pointer_of = [](CUmemorytype type, const void* host, CUdeviceptr device, uintptr_t* out) {
    switch (type) {
      case CU_MEMORYTYPE_HOST:
        *out = reinterpret_cast<uintptr_t>(host);
        return true;
      case CU_MEMORYTYPE_DEVICE:
      case CU_MEMORYTYPE_UNIFIED:
        *out = device;
        return true;
      default:
        return false;
    }
  };
  uintptr_t src_ptr = 0;
  uintptr_t dst_ptr = 0;
  if (!pointer_of(c.srcMemoryType, c.srcHost, c.srcDevice, &src_ptr) ||
      !pointer_of(c.dstMemoryType, c.dstHost, c.dstDevice, &dst_ptr) || c.srcLOD != 0 ||
      c.dstLOD != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (c.WidthInBytes == 0 || c.Height == 0 || c.Depth == 0) return CUDA_SUCCESS;
  Side src;
  Side dst;
  if (!Describe(src_ptr, c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight, c.WidthInBytes,
                c.Height, c.Depth, &src) ||
      !Describe(dst_ptr, c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight, c.WidthInBytes,
                c.Height, c.Depth, &dst)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckEndpoint(dst.base, dst.span, true, c.dstMemoryType == CU_MEMORYTYPE_DEVICE);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r =
          CheckEndpoint(src.base, src.span, false, c.srcMemoryType == CU_MEMORYTYPE_DEVICE);
      r != CUDA_SUCCESS) {
    return r;
  }
  const size_t width = c.WidthInBytes;
  const size_t height = c.Height;
  const size_t depth = c.Depth;
  return Submit(dst.base, src.base, width * height * depth, issue, [=] {
    for (size_t z = 0; z < depth; ++z) {
      for (size_t y = 0; y < height; ++y) {
        std::memmove(reinterpret_cast<void*>(dst.base + z * dst.slice + y * dst.pitch),
                     reinterpret_cast<const void*>(src.base + z * src.slice + y * src.pitch),
                     width);
      }
    }
  });
}

CUresult CopyEngine::Memset(uintptr_t dst, size_t pitch, uint32_t value, unsigned element_size,
                            size_t width, size_t height, Issue issue) {
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  size_t row_bytes = 0;
  if (!Mul(width, element_size, &row_bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (height == 1) pitch = row_bytes;
  if (pitch < row_bytes || dst % element_size != 0 || pitch % element_size != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t span = 0;
  if (!Mul(height - 1, pitch, &span) || !Add(span, row_bytes, &span)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckEndpoint(dst, span, /*write=*/true, /*declared_device=*/true);
      r != CUDA_SUCCESS) {
    return r;
  }
  std::shared_ptr<Stream> stream;
  if (CUresult r = state_->streams().Resolve(issue.stream, issue.mode, &stream);
      r != CUDA_SUCCESS) {
    return r;
  }
  auto op = [=] {
    for (size_t y = 0; y < height; ++y) {
      const uintptr_t row = dst + y * pitch;
      switch (element_size) {
        case 1:
          std::memset(reinterpret_cast<void*>(row), static_cast<int>(value & 0xff), width);
          break;
        case 2: {
          auto* p = reinterpret_cast<uint16_t*>(row);
          for (size_t i = 0; i < width; ++i) p[i] = static_cast<uint16_t>(value);
          break;
        }
        default: {
          auto* p = reinterpret_cast<uint32_t*>(row);
          for (size_t i = 0; i < width; ++i) p[i] = value;
          break;
        }
      }
    }
  };
  // A memset never involves pageable memory (the destination is known memory).
  if (issue.async) return stream->Submit(std::move(op), CU_GRAPH_NODE_TYPE_MEMSET);
  stream->RunAndWait(std::move(op));
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

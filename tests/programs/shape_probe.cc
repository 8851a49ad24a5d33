// shape_probe: 2D and 3D host-device copies, and copies the PCIe scheduler must leave alone,
// checked byte for byte (driver API).
//   shape_probe
// Each case copies a box from a host buffer to device memory (linear, or a CUDA array) and back
// into a second host buffer, at different origins and pitches on every side (a 3D case also with
// plane heights larger than the box), then checks that the box arrived and nothing around it
// was written. The array cases also copy a range between host memory and an array at an offset.
// Two more copies have descriptions that the driver must reject (a pitch narrower than the
// offset plus the width; a plane height shorter than the box): each must fail with
// CUDA_ERROR_INVALID_VALUE, as one driver call would.
// Prints one line per case ("case NAME ok|corrupt"), then "shapes copies=N array_side=M" (the
// host-device copies it made, M of them 2D copies with an array side) and "data ok" or
// "data corrupt".
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    printf("error %s %d\n", what, static_cast<int>(r));
    exit(1);
  }
}

constexpr unsigned char kUntouched = 0xEE;

// A host or device buffer holding planes of rows.
struct Layout {
  size_t pitch, rows_per_plane, planes;
  size_t x, y, z;  // the box's origin in it
  size_t bytes() const { return pitch * rows_per_plane * planes; }
  size_t at(size_t bx, size_t by, size_t bz) const {
    return ((z + bz) * rows_per_plane + (y + by)) * pitch + x + bx;
  }
};

enum class Host { kPinned, kPageable, kUnified };
enum class Call { kSync, kUnaligned, kAsync };

struct Case {
  const char* name;
  bool three_d;
  Host host;
  Call call;
  bool array = false;  // the device side is a CUDA array (2D only)
};

int copies = 0;
int array_side = 0;  // 2D copies with an array side

template <typename Desc>
void SetHost(Desc* d, bool src, Host host, void* p) {
  CUmemorytype type = host == Host::kUnified ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
  if (src) {
    d->srcMemoryType = type;
    if (host == Host::kUnified)
      d->srcDevice = reinterpret_cast<CUdeviceptr>(p);
    else
      d->srcHost = p;
  } else {
    d->dstMemoryType = type;
    if (host == Host::kUnified)
      d->dstDevice = reinterpret_cast<CUdeviceptr>(p);
    else
      d->dstHost = p;
  }
}

// One copy of a w x h x depth box from `from` (in `fl`) to `to` (in `tl`).
void Copy(const Case& c, size_t w, size_t h, size_t depth, bool to_device, void* host_ptr,
          const Layout& hl, CUdeviceptr dev, CUarray array, const Layout& dl, CUstream stream) {
  const Layout& sl = to_device ? hl : dl;
  const Layout& tl = to_device ? dl : hl;
  ++copies;
  if (c.three_d) {
    CUDA_MEMCPY3D d;
    memset(&d, 0, sizeof(d));
    d.srcXInBytes = sl.x, d.srcY = sl.y, d.srcZ = sl.z, d.srcPitch = sl.pitch;
    d.srcHeight = sl.rows_per_plane;
    d.dstXInBytes = tl.x, d.dstY = tl.y, d.dstZ = tl.z, d.dstPitch = tl.pitch;
    d.dstHeight = tl.rows_per_plane;
    d.WidthInBytes = w, d.Height = h, d.Depth = depth;
    if (to_device) {
      SetHost(&d, true, c.host, host_ptr);
      d.dstMemoryType = CU_MEMORYTYPE_DEVICE, d.dstDevice = dev;
    } else {
      d.srcMemoryType = CU_MEMORYTYPE_DEVICE, d.srcDevice = dev;
      SetHost(&d, false, c.host, host_ptr);
    }
    if (c.call == Call::kAsync) {
      Check(cuMemcpy3DAsync_v2(&d, stream), "cuMemcpy3DAsync");
      Check(cuStreamSynchronize(stream), "sync");
    } else {
      Check(cuMemcpy3D_v2(&d), "cuMemcpy3D");
    }
    return;
  }
  CUDA_MEMCPY2D d;
  memset(&d, 0, sizeof(d));
  d.srcXInBytes = sl.x, d.srcY = sl.y, d.srcPitch = sl.pitch;
  d.dstXInBytes = tl.x, d.dstY = tl.y, d.dstPitch = tl.pitch;
  d.WidthInBytes = w, d.Height = h;
  const CUmemorytype device_type = c.array ? CU_MEMORYTYPE_ARRAY : CU_MEMORYTYPE_DEVICE;
  if (to_device) {
    SetHost(&d, true, c.host, host_ptr);
    d.dstMemoryType = device_type, d.dstDevice = dev, d.dstArray = array;
  } else {
    d.srcMemoryType = device_type, d.srcDevice = dev, d.srcArray = array;
    SetHost(&d, false, c.host, host_ptr);
  }
  switch (c.call) {
    case Call::kSync:
      Check(cuMemcpy2D_v2(&d), "cuMemcpy2D");
      break;
    case Call::kUnaligned:
      Check(cuMemcpy2DUnaligned_v2(&d), "cuMemcpy2DUnaligned");
      break;
    case Call::kAsync:
      Check(cuMemcpy2DAsync_v2(&d, stream), "cuMemcpy2DAsync");
      Check(cuStreamSynchronize(stream), "sync");
      break;
  }
}

void* HostBuffer(Host host, size_t bytes, std::vector<unsigned char>* pageable) {
  if (host == Host::kPageable) {
    pageable->assign(bytes, 0);
    return pageable->data();
  }
  void* p = nullptr;
  Check(cuMemAllocHost_v2(&p, bytes), "cuMemAllocHost");
  return p;
}

bool RunCase(const Case& c, CUstream stream) {
  // A row of 12388 bytes: chunk boundaries (multiples of 4 KiB) fall inside rows.
  const size_t w = 3 * 4096 + 100, h = 40, depth = c.three_d ? 3 : 1;
  const Layout src{w + 40, h + 3, depth + 1, 5, 2, c.three_d ? 1u : 0u};
  // A float array's rows are its width in bytes; a linear device buffer gets a wider pitch.
  const Layout dev{c.array ? w + 128 : w + 512, h + 1, depth, 64, 1, 0};
  const Layout back{w + 8, h + 5, depth + 2, 3, 4, c.three_d ? 2u : 0u};
  std::vector<unsigned char> src_store, back_store;
  auto* a = static_cast<unsigned char*>(HostBuffer(c.host, src.bytes(), &src_store));
  auto* b = static_cast<unsigned char*>(HostBuffer(c.host, back.bytes(), &back_store));
  for (size_t i = 0; i < src.bytes(); ++i) a[i] = static_cast<unsigned char>(i * 7 + i / 4099);
  memset(b, kUntouched, back.bytes());
  CUdeviceptr d = 0;
  CUarray array = nullptr;
  if (c.array) {
    CUDA_ARRAY_DESCRIPTOR desc{};
    desc.Width = dev.pitch / 4;
    desc.Height = dev.rows_per_plane;
    desc.Format = CU_AD_FORMAT_FLOAT;
    desc.NumChannels = 1;
    Check(cuArrayCreate_v2(&array, &desc), "cuArrayCreate");
  } else {
    Check(cuMemAlloc_v2(&d, dev.bytes()), "cuMemAlloc");
  }
  if (c.array) array_side += 2;
  Copy(c, w, h, depth, /*to_device=*/true, a, src, d, array, dev, stream);
  Copy(c, w, h, depth, /*to_device=*/false, b, back, d, array, dev, stream);
  bool ok = true;
  std::vector<bool> in_box(back.bytes(), false);
  for (size_t z = 0; z < depth && ok; ++z) {
    for (size_t y = 0; y < h && ok; ++y) {
      for (size_t x = 0; x < w; ++x) {
        in_box[back.at(x, y, z)] = true;
        if (b[back.at(x, y, z)] != a[src.at(x, y, z)]) {
          printf("case %s: byte (%zu,%zu,%zu) differs\n", c.name, x, y, z);
          ok = false;
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < back.bytes() && ok; ++i) {
    if (!in_box[i] && b[i] != kUntouched) {
      printf("case %s: byte %zu outside the box was written\n", c.name, i);
      ok = false;
    }
  }
  if (c.array) {
    Check(cuArrayDestroy(array), "cuArrayDestroy");
  } else {
    Check(cuMemFree_v2(d), "cuMemFree");
  }
  if (c.host != Host::kPageable) {
    Check(cuMemFreeHost(a), "cuMemFreeHost");
    Check(cuMemFreeHost(b), "cuMemFreeHost");
  }
  printf("case %s %s\n", c.name, ok ? "ok" : "corrupt");
  return ok;
}

// A range of host memory into a 1D array at an offset and back out of it.
bool RunArrayRange(const char* name, bool pinned, bool async, CUstream stream) {
  // 100000 elements of 16 bytes: within the 1D array width limit (131072 on current GPUs).
  const size_t elements = 100'000, offset = 4096 + 16, bytes = 1'000'000;
  std::vector<unsigned char> src_store, back_store;
  const Host host = pinned ? Host::kPinned : Host::kPageable;
  auto* a = static_cast<unsigned char*>(HostBuffer(host, bytes, &src_store));
  auto* b = static_cast<unsigned char*>(HostBuffer(host, bytes, &back_store));
  for (size_t i = 0; i < bytes; ++i) a[i] = static_cast<unsigned char>(i * 13 + i / 5003);
  memset(b, kUntouched, bytes);
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = elements;
  desc.Height = 0;
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  desc.NumChannels = 4;
  CUarray array = nullptr;
  Check(cuArrayCreate_v2(&array, &desc), "cuArrayCreate");
  copies += 2;
  if (async) {
    Check(cuMemcpyHtoAAsync_v2(array, offset, a, bytes, stream), "cuMemcpyHtoAAsync");
    Check(cuMemcpyAtoHAsync_v2(b, array, offset, bytes, stream), "cuMemcpyAtoHAsync");
    Check(cuStreamSynchronize(stream), "sync");
  } else {
    Check(cuMemcpyHtoA_v2(array, offset, a, bytes), "cuMemcpyHtoA");
    Check(cuMemcpyAtoH_v2(b, array, offset, bytes), "cuMemcpyAtoH");
  }
  const bool ok = memcmp(a, b, bytes) == 0;
  Check(cuArrayDestroy(array), "cuArrayDestroy");
  if (pinned) {
    Check(cuMemFreeHost(a), "cuMemFreeHost");
    Check(cuMemFreeHost(b), "cuMemFreeHost");
  }
  printf("case %s %s\n", name, ok ? "ok" : "corrupt");
  return ok;
}

// Copies whose descriptions break the driver's layout rules fail as a whole.
bool RunRejected(CUstream stream) {
  const size_t w = 3 * 4096 + 100, h = 40;
  void* host = nullptr;
  Check(cuMemAllocHost_v2(&host, (w + 64) * h * 4), "cuMemAllocHost");
  CUdeviceptr dev = 0;
  Check(cuMemAlloc_v2(&dev, (w + 64) * h * 4), "cuMemAlloc");
  bool ok = true;
  CUDA_MEMCPY2D flat;
  memset(&flat, 0, sizeof(flat));
  flat.srcMemoryType = CU_MEMORYTYPE_HOST, flat.srcHost = host, flat.srcPitch = w;
  flat.dstMemoryType = CU_MEMORYTYPE_DEVICE, flat.dstDevice = dev, flat.dstPitch = w + 10;
  flat.dstXInBytes = 64;  // 64 + w > w + 10
  flat.WidthInBytes = w, flat.Height = h;
  CUresult r = cuMemcpy2D_v2(&flat);
  printf("case bad-pitch %s (%d)\n", r == CUDA_ERROR_INVALID_VALUE ? "ok" : "corrupt", r);
  ok = ok && r == CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D deep;
  memset(&deep, 0, sizeof(deep));
  deep.srcMemoryType = CU_MEMORYTYPE_HOST, deep.srcHost = host;
  deep.srcPitch = w, deep.srcHeight = h / 2 + 1;
  deep.dstMemoryType = CU_MEMORYTYPE_DEVICE, deep.dstDevice = dev;
  deep.dstPitch = w, deep.dstHeight = h / 2;  // planes shorter than the box's h / 2 + 1 rows
  deep.WidthInBytes = w, deep.Height = h / 2 + 1, deep.Depth = 2;
  r = cuMemcpy3DAsync_v2(&deep, stream);
  if (r == CUDA_SUCCESS) r = cuStreamSynchronize(stream);
  printf("case bad-plane-height %s (%d)\n", r == CUDA_ERROR_INVALID_VALUE ? "ok" : "corrupt", r);
  ok = ok && r == CUDA_ERROR_INVALID_VALUE;
  Check(cuMemFree_v2(dev), "cuMemFree");
  Check(cuMemFreeHost(host), "cuMemFreeHost");
  return ok;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  CUdevice dev;
  CUcontext ctx;
  Check(cuInit(0), "cuInit");
  Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
  Check(cuCtxSetCurrent(ctx), "set current");
  CUstream stream;
  Check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const Case cases[] = {
      {"2d-pinned-sync", false, Host::kPinned, Call::kSync},
      {"2d-pageable-sync", false, Host::kPageable, Call::kSync},
      {"2d-pinned-unaligned", false, Host::kPinned, Call::kUnaligned},
      {"2d-pinned-async", false, Host::kPinned, Call::kAsync},
      {"2d-pageable-async", false, Host::kPageable, Call::kAsync},
      {"2d-unified-async", false, Host::kUnified, Call::kAsync},
      {"3d-pinned-sync", true, Host::kPinned, Call::kSync},
      {"3d-pageable-sync", true, Host::kPageable, Call::kSync},
      {"3d-pinned-async", true, Host::kPinned, Call::kAsync},
      {"3d-unified-sync", true, Host::kUnified, Call::kSync},
      {"2d-array-pinned-sync", false, Host::kPinned, Call::kSync, true},
      {"2d-array-pinned-async", false, Host::kPinned, Call::kAsync, true},
  };
  bool ok = true;
  for (const Case& c : cases) ok = RunCase(c, stream) && ok;
  ok = RunArrayRange("array-range-pinned-sync", true, false, stream) && ok;
  ok = RunArrayRange("array-range-pinned-async", true, true, stream) && ok;
  ok = RunArrayRange("array-range-pageable-async", false, true, stream) && ok;
  ok = RunRejected(stream) && ok;
  printf("shapes copies=%d array_side=%d\n", copies, array_side);
  printf("data %s\n", ok ? "ok" : "corrupt");
  return ok ? 0 : 1;
}

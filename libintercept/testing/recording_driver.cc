#include "testing/recording_driver.h"

#include <cstdio>
#include <cstring>

#include "absl/strings/str_format.h"

namespace missile::shim::testing {
namespace {

std::atomic<RecordingDriver*> g_installed{nullptr};

}  // namespace

RecordingDriver::RecordingDriver() {
  g_installed.store(this);
  api_.GetErrorName = &GetErrorName;
  api_.CtxGetCurrent = &CtxGetCurrent;
  api_.CtxGetDevice = &CtxGetDevice;
  api_.CtxSynchronize = &CtxSynchronize;
  api_.DeviceGet = &DeviceGet;
  api_.DeviceGetUuid = &DeviceGetUuid;
  api_.DeviceGetAttribute = &DeviceGetAttribute;
  api_.MemAddressReserve = &MemAddressReserve;
  api_.MemAddressFree = &MemAddressFree;
  api_.MemImportFromShareableHandle = &MemImportFromShareableHandle;
  api_.MemMap = &MemMap;
  api_.MemUnmap = &MemUnmap;
  api_.MemSetAccess = &MemSetAccess;
  api_.MemRelease = &MemRelease;
  api_.StreamIsCapturing = &StreamIsCapturing;
  api_.StreamIsCapturingPtsz = &StreamIsCapturing;
  api_.StreamQuery = &StreamQuery;
  api_.StreamQueryPtsz = &StreamQuery;
  api_.StreamSynchronize = &StreamSynchronize;
  api_.StreamSynchronizePtsz = &StreamSynchronize;
  api_.EventCreate = &EventCreate;
  api_.EventRecord = &EventRecord;
  api_.EventRecordPtsz = &EventRecord;
  api_.EventQuery = &EventQuery;
  api_.EventSynchronize = &EventSynchronize;
  api_.EventDestroy = &EventDestroy;
  api_.MemHostRegister = &MemHostRegister;
  api_.MemHostUnregister = &MemHostUnregister;
  api_.MemHostGetDevicePointer = &MemHostGetDevicePointer;
  api_.StreamWaitValue32 = &StreamWaitValue32;
  api_.StreamWaitValue32Ptsz = &StreamWaitValue32;
  api_.StreamWriteValue32 = &StreamWriteValue32;
  api_.StreamWriteValue32Ptsz = &StreamWriteValue32;
  api_.StreamWriteValue64 = &StreamWriteValue64;
  api_.StreamWriteValue64Ptsz = &StreamWriteValue64;
}

RecordingDriver::~RecordingDriver() { g_installed.store(nullptr); }

RecordingDriver* RecordingDriver::Installed() { return g_installed.load(); }

std::string RecordingDriver::UuidOf(int ordinal) {
  return absl::StrFormat("GPU-%02x000000-0000-0000-0000-000000000000", ordinal + 1);
}

void RecordingDriver::Record(std::string call) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::move(call));
}

std::vector<std::string> RecordingDriver::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

int RecordingDriver::Count(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const std::string& c : calls_) {
    if (c == name || c.rfind(name + " ", 0) == 0) ++n;
  }
  return n;
}

std::vector<std::string> RecordingDriver::Sequence(const std::vector<std::string>& names) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const std::string& c : calls_) {
    std::string name = c.substr(0, c.find(' '));
    for (const std::string& n : names) {
      if (name == n) out.push_back(name);
    }
  }
  return out;
}

void RecordingDriver::ClearCalls() {
  absl::MutexLock lock(&mu_);
  calls_.clear();
}

std::map<CUdeviceptr, size_t> RecordingDriver::mappings() const {
  absl::MutexLock lock(&mu_);
  return mappings_;
}

void RecordingDriver::CompleteEvents() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, done] : events_) done = true;
}

CUresult RecordingDriver::GetErrorName(CUresult r, const char** name) {
  *name = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::CtxGetCurrent(CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(uintptr_t{0x1000});
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::CtxGetDevice(CUdevice* dev) {
  *dev = Installed()->current_device_.load();
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::CtxSynchronize() {
  Installed()->Record("cuCtxSynchronize");
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::DeviceGet(CUdevice* dev, int ordinal) {
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::DeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  memset(uuid->bytes, 0, sizeof(uuid->bytes));
  uuid->bytes[0] = static_cast<char>(dev + 1);
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::DeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  (void)attr;
  (void)dev;
  *value = 512;
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemAddressReserve(CUdeviceptr* ptr, size_t size, size_t align,
                                            CUdeviceptr addr, unsigned long long flags) {
  (void)addr;
  (void)flags;
  RecordingDriver* d = Installed();
  {
    absl::MutexLock lock(&d->mu_);
    *ptr = (d->next_va_ + align - 1) / align * align;
    d->next_va_ = *ptr + size;
  }
  d->Record(absl::StrFormat("cuMemAddressReserve %#x %u", *ptr, size));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemAddressFree(CUdeviceptr ptr, size_t size) {
  Installed()->Record(absl::StrFormat("cuMemAddressFree %#x %u", ptr, size));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                       void* os_handle,
                                                       CUmemAllocationHandleType type) {
  (void)type;
  RecordingDriver* d = Installed();
  if (d->fail_next_import_.exchange(false)) {
    d->Record("cuMemImportFromShareableHandle failed");
    return CUDA_ERROR_INVALID_VALUE;
  }
  {
    absl::MutexLock lock(&d->mu_);
    *handle = d->next_handle_++;
  }
  d->Record(absl::StrFormat("cuMemImportFromShareableHandle fd%d h%u",
                            static_cast<int>(reinterpret_cast<uintptr_t>(os_handle)), *handle));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags) {
  (void)offset;
  (void)flags;
  RecordingDriver* d = Installed();
  {
    absl::MutexLock lock(&d->mu_);
    d->mappings_[ptr] = size;
  }
  d->Record(absl::StrFormat("cuMemMap %#x %u h%u", ptr, size, handle));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemUnmap(CUdeviceptr ptr, size_t size) {
  RecordingDriver* d = Installed();
  {
    // Like the driver: the range must cover whole mappings.
    absl::MutexLock lock(&d->mu_);
    auto it = d->mappings_.lower_bound(ptr);
    if (it == d->mappings_.end() || it->first != ptr) return CUDA_ERROR_INVALID_VALUE;
    while (it != d->mappings_.end() && it->first < ptr + size) {
      if (it->first + it->second > ptr + size) return CUDA_ERROR_INVALID_VALUE;
      it = d->mappings_.erase(it);
    }
  }
  d->Record(absl::StrFormat("cuMemUnmap %#x %u", ptr, size));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                       size_t count) {
  (void)desc;
  (void)count;
  Installed()->Record(absl::StrFormat("cuMemSetAccess %#x %u", ptr, size));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemRelease(CUmemGenericAllocationHandle handle) {
  Installed()->Record(absl::StrFormat("cuMemRelease h%u", handle));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::StreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  (void)stream;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::StreamQuery(CUstream stream) {
  (void)stream;
  return Installed()->stream_query_.load();
}

CUresult RecordingDriver::StreamSynchronize(CUstream stream) {
  (void)stream;
  Installed()->Record("cuStreamSynchronize");
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::EventCreate(CUevent* event, unsigned int flags) {
  (void)flags;
  RecordingDriver* d = Installed();
  absl::MutexLock lock(&d->mu_);
  uintptr_t id = d->next_event_++;
  d->events_[id] = !d->events_pending_.load();
  *event = reinterpret_cast<CUevent>(id);
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::EventRecord(CUevent event, CUstream stream) {
  (void)event;
  (void)stream;
  Installed()->Record("cuEventRecord");
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::EventQuery(CUevent event) {
  RecordingDriver* d = Installed();
  absl::MutexLock lock(&d->mu_);
  return d->events_[reinterpret_cast<uintptr_t>(event)] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult RecordingDriver::EventSynchronize(CUevent event) {
  RecordingDriver* d = Installed();
  absl::MutexLock lock(&d->mu_);
  d->events_[reinterpret_cast<uintptr_t>(event)] = true;  // as if the stream got there
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::EventDestroy(CUevent event) {
  RecordingDriver* d = Installed();
  absl::MutexLock lock(&d->mu_);
  d->events_.erase(reinterpret_cast<uintptr_t>(event));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemHostRegister(void* p, size_t size, unsigned int flags) {
  (void)flags;
  Installed()->Record(absl::StrFormat("cuMemHostRegister %p %u", p, size));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemHostUnregister(void* p) {
  Installed()->Record(absl::StrFormat("cuMemHostUnregister %p", p));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::MemHostGetDevicePointer(CUdeviceptr* dev, void* p, unsigned int flags) {
  (void)flags;
  *dev = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::StreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                            unsigned int flags) {
  (void)stream;
  (void)flags;
  Installed()->Record(absl::StrFormat("cuStreamWaitValue32 %#x %u", addr, value));
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::StreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                             unsigned int flags) {
  (void)stream;
  (void)flags;
  RecordingDriver* d = Installed();
  d->Record(absl::StrFormat("cuStreamWriteValue32 %#x %u", addr, value));
  if (d->run_stream_writes_.load()) {
    reinterpret_cast<std::atomic<uint32_t>*>(addr)->store(value, std::memory_order_release);
  }
  return CUDA_SUCCESS;
}

CUresult RecordingDriver::StreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                             unsigned int flags) {
  (void)stream;
  (void)flags;
  RecordingDriver* d = Installed();
  d->Record(absl::StrFormat("cuStreamWriteValue64 %#x %u", addr, value));
  if (d->run_stream_writes_.load()) {
    reinterpret_cast<std::atomic<uint64_t>*>(addr)->store(value, std::memory_order_release);
  }
  return CUDA_SUCCESS;
}

}  // namespace missile::shim::testing

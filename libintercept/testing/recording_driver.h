// A fake driver behind a DriverApi, for in-process tests of the shim's memory and copy paths:
// every call is recorded (name and main arguments, in order) and answered from a small model
// (one device per UUID, address reservations, imported handles, mappings, events, streams).
//
// DriverApi holds plain function pointers, so the functions reach the model through one
// installed instance: a test makes a RecordingDriver, which installs itself, and uses api().
// Host registration maps the host address to the same device address, so a stream write the
// test "runs" lands in the host memory it names.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_TESTING_RECORDING_DRIVER_H_
#define MISSILE_LIBINTERCEPT_TESTING_RECORDING_DRIVER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "driver_api.h"

namespace missile::shim::testing {

class RecordingDriver {
 public:
  // Installs this instance; only one may live at a time.
  RecordingDriver();
  ~RecordingDriver();

  const DriverApi& api() const { return api_; }

  // The UUID the fake reports for device `ordinal`, as the daemon writes it ("GPU-...").
  static std::string UuidOf(int ordinal);

  // Every call so far, oldest first: "cuMemMap 0x7f.. 2097152", "cuMemUnmap ...".
  std::vector<std::string> calls() const;
  // How many calls of `name` ("cuMemMap") were made.
  int Count(const std::string& name) const;
  // The names of the calls so far, in order, keeping only those in `names`.
  std::vector<std::string> Sequence(const std::vector<std::string>& names) const;
  void ClearCalls();

  // Live mappings made with cuMemMap: start -> size.
  std::map<CUdeviceptr, size_t> mappings() const;

  // Answers of the model the tests steer.
  void set_current_device(CUdevice dev) { current_device_ = dev; }
  // What cuStreamQuery answers (CUDA_SUCCESS: idle; CUDA_ERROR_NOT_READY: busy).
  void set_stream_query(CUresult r) { stream_query_ = r; }
  // Whether a cuStreamWriteValue32/64 runs at once (as an idle GPU would) or is only recorded.
  void set_run_stream_writes(bool run) { run_stream_writes_ = run; }
  // Events created from now on complete only when CompleteEvents is called.
  void set_events_pending(bool pending) { events_pending_ = pending; }
  void CompleteEvents();
  // Fails the next cuMemImportFromShareableHandle with CUDA_ERROR_INVALID_VALUE.
  void FailNextImport() { fail_next_import_ = true; }

 private:
  static RecordingDriver* Installed();
  void Record(std::string call);

  // The fake functions, each reaching Installed().
  static CUresult CUDAAPI GetErrorName(CUresult r, const char** name);
  static CUresult CUDAAPI CtxGetCurrent(CUcontext* ctx);
  static CUresult CUDAAPI CtxGetDevice(CUdevice* dev);
  static CUresult CUDAAPI CtxSynchronize();
  static CUresult CUDAAPI DeviceGet(CUdevice* dev, int ordinal);
  static CUresult CUDAAPI DeviceGetUuid(CUuuid* uuid, CUdevice dev);
  static CUresult CUDAAPI DeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev);
  static CUresult CUDAAPI MemAddressReserve(CUdeviceptr* ptr, size_t size, size_t align,
                                            CUdeviceptr addr, unsigned long long flags);
  static CUresult CUDAAPI MemAddressFree(CUdeviceptr ptr, size_t size);
  static CUresult CUDAAPI MemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                       void* os_handle,
                                                       CUmemAllocationHandleType type);
  static CUresult CUDAAPI MemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags);
  static CUresult CUDAAPI MemUnmap(CUdeviceptr ptr, size_t size);
  static CUresult CUDAAPI MemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                       size_t count);
  static CUresult CUDAAPI MemRelease(CUmemGenericAllocationHandle handle);
  static CUresult CUDAAPI StreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status);
  static CUresult CUDAAPI StreamQuery(CUstream stream);
  static CUresult CUDAAPI StreamSynchronize(CUstream stream);
  static CUresult CUDAAPI EventCreate(CUevent* event, unsigned int flags);
  static CUresult CUDAAPI EventRecord(CUevent event, CUstream stream);
  static CUresult CUDAAPI EventQuery(CUevent event);
  static CUresult CUDAAPI EventSynchronize(CUevent event);
  static CUresult CUDAAPI EventDestroy(CUevent event);
  static CUresult CUDAAPI MemHostRegister(void* p, size_t size, unsigned int flags);
  static CUresult CUDAAPI MemHostUnregister(void* p);
  static CUresult CUDAAPI MemHostGetDevicePointer(CUdeviceptr* dev, void* p, unsigned int flags);
  static CUresult CUDAAPI StreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                            unsigned int flags);
  static CUresult CUDAAPI StreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                             unsigned int flags);
  static CUresult CUDAAPI StreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                             unsigned int flags);

  DriverApi api_;
  std::atomic<CUdevice> current_device_{0};
  std::atomic<CUresult> stream_query_{CUDA_SUCCESS};
  std::atomic<bool> run_stream_writes_{false};
  std::atomic<bool> events_pending_{false};
  std::atomic<bool> fail_next_import_{false};

  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  CUdeviceptr next_va_ ABSL_GUARDED_BY(mu_) = 0x7f0000000000;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<CUdeviceptr, size_t> mappings_ ABSL_GUARDED_BY(mu_);
  // Event id -> complete.
  std::map<uintptr_t, bool> events_ ABSL_GUARDED_BY(mu_);
  uintptr_t next_event_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace missile::shim::testing

#endif  // MISSILE_LIBINTERCEPT_TESTING_RECORDING_DRIVER_H_

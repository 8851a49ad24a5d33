// Entry points: streams, events, host functions and stream memory operations.
//
// On a capturing stream (graph_api.cc), host functions and memory operations become graph nodes;
// cuStreamSynchronize, cuStreamQuery and cuStreamAddCallback are refused and invalidate the
// capture, as in the driver; an event record marks the event as a point of the capture, and a
// wait for it on the same capturing stream is a no-op (other waits involving a capture are not
// supported).

#include <atomic>
#include <chrono>
#include <thread>

#include "entry_points.h"
#include "fake_state.h"

namespace fakecuda {
namespace {

using StreamPtr = std::shared_ptr<Stream>;

CUresult ResolveStream(CUstream h, DefaultStream mode, StreamPtr* out) {
  return State().streams().Resolve(h, mode, out);
}

CUresult StreamCreate(CUstream* out, unsigned flags, int priority) {
  Context* ctx = nullptr;
  if (CUresult r = State().contexts().Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().streams().Create(ctx, flags, priority, out);
}

CUresult StreamSynchronize(CUstream h, DefaultStream mode) {
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = s->RefuseDuringCapture(); r != CUDA_SUCCESS) return r;
  s->Synchronize();
  return CUDA_SUCCESS;
}

CUresult StreamQuery(CUstream h, DefaultStream mode) {
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = s->RefuseDuringCapture(); r != CUDA_SUCCESS) return r;
  return s->Idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult StreamWaitEvent(CUstream h, CUevent e, unsigned flags, DefaultStream mode) {
  if (flags != CU_EVENT_WAIT_DEFAULT && flags != CU_EVENT_WAIT_EXTERNAL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Event> event;
  if (CUresult r = State().streams().LookupEvent(e, &event); r != CUDA_SUCCESS) return r;
  const uint64_t capture = s->Capture().id;
  if (capture != 0 && event->capture_id() == 0 && event->LatestRecord() == 0) {
    return CUDA_SUCCESS;  // never recorded: complete, nothing to join
  }
  if (capture != 0 || event->capture_id() != 0) {
    // A join within the one capture: everything before the record is already before the wait.
    return capture == event->capture_id() ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
  }
  // Waits for the event's latest record as of now; an event never recorded is complete.
  if (const uint64_t generation = event->LatestRecord(); generation != 0) {
    s->Enqueue([event, generation] { event->WaitFor(generation); });
  }
  return CUDA_SUCCESS;
}

CUresult LaunchHostFunc(CUstream h, CUhostFn fn, void* user_data, DefaultStream mode) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  return s->Submit([fn, user_data] { fn(user_data); }, CU_GRAPH_NODE_TYPE_HOST);
}

CUresult AddCallback(CUstream h, CUstreamCallback callback, void* user_data, unsigned flags,
                     DefaultStream mode) {
  if (callback == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = s->RefuseDuringCapture(); r != CUDA_SUCCESS) return r;
  s->Enqueue([callback, h, user_data] { callback(h, CUDA_SUCCESS, user_data); });
  return CUDA_SUCCESS;
}

template <typename T>
CUresult WriteValue(CUstream h, CUdeviceptr addr, T value, unsigned flags, DefaultStream mode) {
  // CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is not supported by the v2 API (the real driver
  // answers CUDA_ERROR_INVALID_VALUE on the H200), and the fake gives every entry point v2
  // semantics.
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT || addr % sizeof(T) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = State().address_space().CheckAccess(addr, sizeof(T), /*write=*/true);
      r != CUDA_SUCCESS) {
    return r;
  }
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  return s->Submit([addr, value] {
    std::atomic_ref<T>(*reinterpret_cast<T*>(addr)).store(value, std::memory_order_seq_cst);
  }, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
}

template <typename T>
bool WaitConditionMet(unsigned op, T current, T value) {
  using Signed = std::make_signed_t<T>;
  switch (op) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return static_cast<Signed>(current - value) >= 0;  // cyclic, as documented
    case CU_STREAM_WAIT_VALUE_EQ:
      return current == value;
    case CU_STREAM_WAIT_VALUE_AND:
      return (current & value) != 0;
    default:  // CU_STREAM_WAIT_VALUE_NOR
      return static_cast<T>(~(current | value)) != 0;
  }
}

template <typename T>
CUresult WaitValue(CUstream h, CUdeviceptr addr, T value, unsigned flags, DefaultStream mode) {
  const unsigned op = flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH);
  if (op > CU_STREAM_WAIT_VALUE_NOR || addr % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = State().address_space().CheckAccess(addr, sizeof(T), /*write=*/false);
      r != CUDA_SUCCESS) {
    return r;
  }
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  return s->Submit([addr, value, op] {
    std::atomic_ref<T> word(*reinterpret_cast<T*>(addr));
    auto pause = std::chrono::microseconds(1);
    while (!WaitConditionMet<T>(op, word.load(std::memory_order_seq_cst), value)) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
}

CUresult EventRecord(CUevent e, CUstream h, DefaultStream mode) {
  std::shared_ptr<Event> event;
  if (CUresult r = State().streams().LookupEvent(e, &event); r != CUDA_SUCCESS) return r;
  StreamPtr s;
  if (CUresult r = ResolveStream(h, mode, &s); r != CUDA_SUCCESS) return r;
  if (const uint64_t capture = s->Capture().id; capture != 0) {
    event->RecordInCapture(capture);
    return CUDA_SUCCESS;
  }
  const uint64_t generation = event->BeginRecord();
  // The event completes together with the stream's reaching it.
  s->EnqueueMarked({}, [event, generation] { event->Complete(generation, MonotonicNowNs()); });
  return CUDA_SUCCESS;
}

CUresult ElapsedTime(float* ms, CUevent start, CUevent end) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Event> a;
  std::shared_ptr<Event> b;
  if (CUresult r = State().streams().LookupEvent(start, &a); r != CUDA_SUCCESS) return r;
  if (CUresult r = State().streams().LookupEvent(end, &b); r != CUDA_SUCCESS) return r;
  return a->ElapsedMs(*b, ms);
}

}  // namespace
}  // namespace fakecuda

using fakecuda::DefaultStream;
using fakecuda::State;

constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

extern "C" {

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  FAKECUDA_ENTER(cuStreamCreate);
  return fakecuda::StreamCreate(phStream, Flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  FAKECUDA_ENTER(cuStreamCreateWithPriority);
  return fakecuda::StreamCreate(phStream, flags, priority);
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
  FAKECUDA_ENTER(cuStreamDestroy_v2);
  return State().streams().Destroy(hStream);
}

CUresult cuStreamSynchronize(CUstream hStream) {
  FAKECUDA_ENTER(cuStreamSynchronize);
  return fakecuda::StreamSynchronize(hStream, kLegacy);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
  FAKECUDA_ENTER(cuStreamSynchronize_ptsz);
  return fakecuda::StreamSynchronize(hStream, kPerThread);
}

CUresult cuStreamQuery(CUstream hStream) {
  FAKECUDA_ENTER(cuStreamQuery);
  return fakecuda::StreamQuery(hStream, kLegacy);
}

CUresult cuStreamQuery_ptsz(CUstream hStream) {
  FAKECUDA_ENTER(cuStreamQuery_ptsz);
  return fakecuda::StreamQuery(hStream, kPerThread);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  FAKECUDA_ENTER(cuStreamWaitEvent);
  return fakecuda::StreamWaitEvent(hStream, hEvent, Flags, kLegacy);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  FAKECUDA_ENTER(cuStreamWaitEvent_ptsz);
  return fakecuda::StreamWaitEvent(hStream, hEvent, Flags, kPerThread);
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  FAKECUDA_ENTER(cuLaunchHostFunc);
  return fakecuda::LaunchHostFunc(hStream, fn, userData, kLegacy);
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) {
  FAKECUDA_ENTER(cuLaunchHostFunc_ptsz);
  return fakecuda::LaunchHostFunc(hStream, fn, userData, kPerThread);
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void* userData,
                             unsigned int flags) {
  FAKECUDA_ENTER(cuStreamAddCallback);
  return fakecuda::AddCallback(hStream, callback, userData, flags, kLegacy);
}

CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void* userData,
                                  unsigned int flags) {
  FAKECUDA_ENTER(cuStreamAddCallback_ptsz);
  return fakecuda::AddCallback(hStream, callback, userData, flags, kPerThread);
}

// The v1 (CUDA 8/9) and v2 (CUDA 11.7) memory operations share their ABI; the fake gives both
// the v2 semantics.
#define FAKECUDA_MEMOP(name, impl, type, mode)                                       \
  CUresult name(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) { \
    FAKECUDA_ENTER(name);                                                            \
    return fakecuda::impl<type>(stream, addr, value, flags, mode);                   \
  }
FAKECUDA_MEMOP(cuStreamWriteValue32, WriteValue, cuuint32_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWriteValue32_ptsz, WriteValue, cuuint32_t, kPerThread)
FAKECUDA_MEMOP(cuStreamWriteValue32_v2, WriteValue, cuuint32_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWriteValue32_v2_ptsz, WriteValue, cuuint32_t, kPerThread)
FAKECUDA_MEMOP(cuStreamWaitValue32, WaitValue, cuuint32_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWaitValue32_ptsz, WaitValue, cuuint32_t, kPerThread)
FAKECUDA_MEMOP(cuStreamWaitValue32_v2, WaitValue, cuuint32_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWaitValue32_v2_ptsz, WaitValue, cuuint32_t, kPerThread)
FAKECUDA_MEMOP(cuStreamWriteValue64, WriteValue, cuuint64_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWriteValue64_ptsz, WriteValue, cuuint64_t, kPerThread)
FAKECUDA_MEMOP(cuStreamWriteValue64_v2, WriteValue, cuuint64_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWriteValue64_v2_ptsz, WriteValue, cuuint64_t, kPerThread)
FAKECUDA_MEMOP(cuStreamWaitValue64, WaitValue, cuuint64_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWaitValue64_ptsz, WaitValue, cuuint64_t, kPerThread)
FAKECUDA_MEMOP(cuStreamWaitValue64_v2, WaitValue, cuuint64_t, kLegacy)
FAKECUDA_MEMOP(cuStreamWaitValue64_v2_ptsz, WaitValue, cuuint64_t, kPerThread)
#undef FAKECUDA_MEMOP

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  FAKECUDA_ENTER(cuEventCreate);
  fakecuda::Context* ctx = nullptr;
  if (CUresult r = State().contexts().Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().streams().CreateEvent(ctx, Flags, phEvent);
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  FAKECUDA_ENTER(cuEventRecord);
  return fakecuda::EventRecord(hEvent, hStream, kLegacy);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  FAKECUDA_ENTER(cuEventRecord_ptsz);
  return fakecuda::EventRecord(hEvent, hStream, kPerThread);
}

CUresult cuEventQuery(CUevent hEvent) {
  FAKECUDA_ENTER(cuEventQuery);
  std::shared_ptr<fakecuda::Event> event;
  if (CUresult r = State().streams().LookupEvent(hEvent, &event); r != CUDA_SUCCESS) return r;
  return event->Query();
}

CUresult cuEventSynchronize(CUevent hEvent) {
  FAKECUDA_ENTER(cuEventSynchronize);
  std::shared_ptr<fakecuda::Event> event;
  if (CUresult r = State().streams().LookupEvent(hEvent, &event); r != CUDA_SUCCESS) return r;
  event->Synchronize();
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  FAKECUDA_ENTER(cuEventElapsedTime);
  return fakecuda::ElapsedTime(pMilliseconds, hStart, hEnd);
}

CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  FAKECUDA_ENTER(cuEventElapsedTime_v2);
  return fakecuda::ElapsedTime(pMilliseconds, hStart, hEnd);
}

CUresult cuEventDestroy_v2(CUevent hEvent) {
  FAKECUDA_ENTER(cuEventDestroy_v2);
  return State().streams().DestroyEvent(hEvent);
}

}  // extern "C"

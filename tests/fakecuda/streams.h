// Streams and events.
//
// Every stream runs its operations in FIFO order on its own worker thread, so asynchronous calls
// return at once and really overlap with the host and with other streams. Stream 0 and
// CU_STREAM_LEGACY are one default stream per context; CU_STREAM_PER_THREAD, and stream 0 in the
// _ptds/_ptsz entry points, are one default stream per (host thread, context), ended when the
// thread exits. The legacy default stream's implicit synchronisation with other blocking streams
// is NOT modelled: it is an ordinary stream here.
//
// A CUstream handle is the address of its Stream, a CUevent the address of its Event; both are
// looked up in a registry, so unknown or destroyed handles give CUDA_ERROR_INVALID_HANDLE.
// Destroying a stream returns at once; its queued work still runs, then the worker exits.
// Thread-safe. Operations run on a worker must not call back into the blocking parts of the
// driver for their own stream (the real driver forbids CUDA calls in host functions too).
//
// Stream capture (graphs.h): while a stream captures, Submit() records asynchronous operations
// as nodes of the capture's graph instead of queueing them. Only linear capture on one stream is
// modelled. What is queued with Enqueue / RunAndWait (synchronous calls, event records and waits,
// stream-ordered frees) is never captured.

#ifndef MISSILE_TESTS_FAKECUDA_STREAMS_H_
#define MISSILE_TESTS_FAKECUDA_STREAMS_H_

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "launch_callback.h"
#include "thread_annotations.h"
#include "tpcs.h"

namespace fakecuda {

class FakeState;
class Graph;
struct Context;

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  using Op = std::function<void()>;

  Stream(Context* ctx, unsigned flags, int priority);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Starts the worker thread. It keeps the stream alive until Close() and the queue drained.
  void Start();
  // Appends an operation; returns its sequence number (1-based).
  uint64_t Enqueue(Op op) FAKECUDA_LOCKS_EXCLUDED(mu_) { return EnqueueMarked(std::move(op), {}); }
  // Enqueue, and when `op` has run, `mark` runs under the stream's lock as the stream counts the
  // operation complete: what `mark` does (complete an event) and the stream's being done with
  // the operation are seen together. `mark` must not call into the stream.
  uint64_t EnqueueMarked(Op op, Op mark) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Blocks until operation `seq` has run.
  void WaitFor(uint64_t seq) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Blocks until everything enqueued before the call has run.
  void Synchronize() FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Appends `op` and waits for it (how synchronous calls keep stream order).
  void RunAndWait(Op op) { WaitFor(Enqueue(std::move(op))); }
  // An asynchronous operation: recorded into the capture while the stream captures, else
  // appended (and waited for when `wait`, as for an "async" copy of pageable memory).
  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED when the capture was invalidated.
  CUresult Submit(Op op, CUgraphNodeType type, bool wait = false) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // A kernel launch: recorded as a kernel node while the stream captures (its TPC mask is taken
  // when the graph is uploaded), else `callbacks` run now, on the calling thread, and the kernel
  // is appended with the TPCs they disabled.
  CUresult SubmitKernel(KernelTask task, const LaunchCallbacks& callbacks)
      FAKECUDA_LOCKS_EXCLUDED(mu_);
  bool Idle() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // The worker exits once the queue is drained; later Enqueue calls are dropped.
  void Close() FAKECUDA_LOCKS_EXCLUDED(mu_);
  bool closed() const FAKECUDA_LOCKS_EXCLUDED(mu_);

  // Starts capturing into `graph` under capture id `id`; CUDA_ERROR_ILLEGAL_STATE when the
  // stream already captures.
  CUresult BeginCapture(std::shared_ptr<Graph> graph, uint64_t id) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Ends the capture and hands out its graph: CUDA_ERROR_ILLEGAL_STATE when not capturing,
  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (with the graph, to be discarded) when invalidated.
  CUresult EndCapture(std::shared_ptr<Graph>* graph) FAKECUDA_LOCKS_EXCLUDED(mu_);
  struct CaptureInfo {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    uint64_t id = 0;  // 0 when not capturing
    std::shared_ptr<Graph> graph;
  };
  CaptureInfo Capture() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // For an operation the driver forbids on a capturing stream: invalidates the capture and
  // returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; CUDA_SUCCESS when the stream does not capture.
  CUresult RefuseDuringCapture() FAKECUDA_LOCKS_EXCLUDED(mu_);

  Context* ctx() const { return ctx_; }
  unsigned flags() const { return flags_; }
  int priority() const { return priority_; }
  CUstream handle() { return reinterpret_cast<CUstream>(this); }

 private:
  void Run();

  Context* const ctx_;
  const unsigned flags_;
  const int priority_;
  mutable Mutex mu_;
  std::condition_variable work_cv_;
  mutable std::condition_variable done_cv_;
  struct Item {
    Op op;
    Op mark;
  };
  std::deque<Item> queue_ FAKECUDA_GUARDED_BY(mu_);
  uint64_t enqueued_ FAKECUDA_GUARDED_BY(mu_) = 0;
  uint64_t completed_ FAKECUDA_GUARDED_BY(mu_) = 0;
  bool closing_ FAKECUDA_GUARDED_BY(mu_) = false;
  std::shared_ptr<Graph> capture_ FAKECUDA_GUARDED_BY(mu_);  // set while capturing
  uint64_t capture_id_ FAKECUDA_GUARDED_BY(mu_) = 0;
  bool capture_invalidated_ FAKECUDA_GUARDED_BY(mu_) = false;
};

class Event {
 public:
  explicit Event(Context* ctx, unsigned flags) : ctx_(ctx), flags_(flags) {}

  // Starts a record: returns the generation the recording stream completes with Complete().
  // Ends the event's being a point of a capture (RecordInCapture).
  uint64_t BeginRecord();
  void Complete(uint64_t generation, uint64_t time_ns);
  // CUDA_SUCCESS when the latest record completed (or there was none), CUDA_ERROR_NOT_READY.
  CUresult Query() const;
  void Synchronize() const;
  // The generation of the latest record (0: never recorded).
  uint64_t LatestRecord() const;
  void WaitFor(uint64_t generation) const;
  // Milliseconds from this event's completion to `end`'s.
  CUresult ElapsedMs(const Event& end, float* ms) const;
  // A record on a capturing stream adds no node; it marks the event as a point of capture `id`
  // (0: the latest record was an ordinary one), which only a wait within that capture may use.
  void RecordInCapture(uint64_t id) { capture_id_.store(id); }
  uint64_t capture_id() const { return capture_id_.load(); }

  Context* ctx() const { return ctx_; }
  unsigned flags() const { return flags_; }

 private:
  Context* const ctx_;
  const unsigned flags_;
  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t recorded_ FAKECUDA_GUARDED_BY(mu_) = 0;
  uint64_t completed_ FAKECUDA_GUARDED_BY(mu_) = 0;
  uint64_t time_ns_ FAKECUDA_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> capture_id_{0};
};

// What stream handle 0 means for an entry point: the context's legacy default stream, or the
// calling thread's per-thread default stream (the _ptds/_ptsz variants).
enum class DefaultStream { kLegacy, kPerThread };

class StreamManager {
 public:
  explicit StreamManager(FakeState* state);
  StreamManager(const StreamManager&) = delete;
  StreamManager& operator=(const StreamManager&) = delete;

  CUresult Create(Context* ctx, unsigned flags, int priority, CUstream* out);
  CUresult Destroy(CUstream handle);
  // The stream `handle` names (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a created stream).
  // Default streams belong to the calling thread's current context.
  CUresult Resolve(CUstream handle, DefaultStream mode, std::shared_ptr<Stream>* out);

  // Waits for all work of every stream of the context.
  void SynchronizeContext(Context* ctx);
  // Drains and ends every stream of the context.
  void ReleaseContext(Context* ctx);

  CUresult CreateEvent(Context* ctx, unsigned flags, CUevent* out);
  CUresult DestroyEvent(CUevent handle);
  CUresult LookupEvent(CUevent handle, std::shared_ptr<Event>* out);

  // In a forked child: drops the calling thread's per-thread streams (their workers do not exist).
  static void ResetThreadAfterFork();

 private:
  std::vector<std::shared_ptr<Stream>> StreamsOf(Context* ctx) FAKECUDA_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<Stream> PerThreadStream(Context* ctx) FAKECUDA_LOCKS_EXCLUDED(mu_);

  FakeState* state_;
  Mutex mu_;
  std::unordered_map<CUstream, std::shared_ptr<Stream>> streams_ FAKECUDA_GUARDED_BY(mu_);
  std::unordered_map<Context*, std::shared_ptr<Stream>> legacy_ FAKECUDA_GUARDED_BY(mu_);
  std::unordered_map<Context*, std::vector<std::weak_ptr<Stream>>> per_thread_
      FAKECUDA_GUARDED_BY(mu_);
  std::unordered_map<CUevent, std::shared_ptr<Event>> events_ FAKECUDA_GUARDED_BY(mu_);
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_STREAMS_H_

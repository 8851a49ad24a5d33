// What a completion mark in one tenant costs another tenant's GPU work (docs/results.md, "The
// top end's gap"). Two processes share the GPU (as MPS clients, the BE at client
// priority 1, as bench/run_mark_cost_on_gpu.sh starts them):
//   mark_cost be SECONDS [ITERS] [KIND]
//                                 a BE that launches wide kernels back to back and prints how
//                                 many it finished per second (from 1 s to SECONDS - 1 s). KIND
//                                 burn (the default): arithmetic only, ITERS 20000 about 200 us
//                                 each on an H100, 5,064 a second; stream: each reads and writes
//                                 ITERS MiB of device memory (a memory-bound BE, as a training
//                                 job's kernels largely are: a barrier that waits for memory
//                                 traffic would cost it what it cannot cost burn);
//   mark_cost ls MODE SECONDS     an LS that decodes "tokens" (a burst of small kernels, a mark,
//                                 a 4-byte copy to the host, a mark, a synchronisation) and
//                                 prints tokens per second and the marks it made.
// MODE is how each mark is made: none, write-host (cuStreamWriteValue64 into mapped host memory:
// what the pacer does), write-dev (the same into device memory), event (cuEventRecord of an
// event without timing), kernel-host (a one-thread kernel storing the value into mapped host
// memory), g-MODE (MODE with each token's kernels replayed as one CUDA graph), write-host-nobar (write-host through the driver's first cuStreamWriteValue64 with
// CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER, which the _v2 entry point no longer takes). Built
// with nvcc (sm_90); not part of the CMake build, which needs no CUDA toolkit.
#include <cuda.h>
#include <cuda_runtime.h>

#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#define CHECK_RT(x)                                                                  \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_));           \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define CHECK_DRV(x)                                                                 \
  do {                                                                               \
    CUresult r_ = (x);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                        \
      std::fprintf(stderr, "%s failed: %d\n", #x, static_cast<int>(r_));             \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__global__ void Burn(float* out, int iters) {
  float a = threadIdx.x * 0.001f, b = blockIdx.x * 0.002f;
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, 0.999f, b);
    b = fmaf(b, 0.998f, a);
  }
  if (a == 12345.0f) out[blockIdx.x] = b;  // keeps the loop
}

// Reads `n` float4 and writes them scaled: memory traffic, little arithmetic.
__global__ void Stream(const float4* in, float4* out, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float4 v = in[i];
    v.x = v.x * 0.999f + 1.0f;
    v.y = v.y * 0.999f + 1.0f;
    v.z = v.z * 0.999f + 1.0f;
    v.w = v.w * 0.999f + 1.0f;
    out[i] = v;
  }
}

__global__ void MarkKernel(unsigned long long* where, unsigned long long value) {
  *reinterpret_cast<volatile unsigned long long*>(where) = value;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int RunBe(double seconds, int iters, const std::string& kind) {
  if (kind != "burn" && kind != "stream") {
    std::fprintf(stderr, "unknown BE kind %s (burn or stream)\n", kind.c_str());
    return 2;
  }
  int sms = 0;
  CHECK_RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out = nullptr;
  CHECK_RT(cudaMalloc(&out, 1 << 20));
  // stream: two buffers of ITERS MiB each.
  const size_t bytes = kind == "stream" ? static_cast<size_t>(iters) << 20 : 0;
  float4 *src = nullptr, *dst = nullptr;
  if (bytes != 0) {
    CHECK_RT(cudaMalloc(&src, bytes));
    CHECK_RT(cudaMalloc(&dst, bytes));
    CHECK_RT(cudaMemset(src, 0, bytes));
  }
  cudaStream_t s;
  CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int blocks = 4 * sms;  // iters 20000: about 200 us a kernel on an H100 (5,064 a second)
  const double start = Now();
  long done = 0, n0 = 0, n1 = 0;
  double t0 = 0, t1 = 0;
  while (Now() - start < seconds) {
    for (int i = 0; i < 8; ++i) {
      if (bytes != 0) {
        Stream<<<blocks, 256, 0, s>>>(src, dst, bytes / sizeof(float4));
      } else {
        Burn<<<blocks, 256, 0, s>>>(out, iters);
      }
    }
    CHECK_RT(cudaStreamSynchronize(s));
    done += 8;
    const double t = Now() - start;
    if (t0 == 0 && t >= 1.0) {
      t0 = t;
      n0 = done;
    }
    if (t <= seconds - 1.0) {
      t1 = t;
      n1 = done;
    }
  }
  std::printf("be kind %s kernels_per_s %.1f over %.2f s\n", kind.c_str(), (n1 - n0) / (t1 - t0),
              t1 - t0);
  return 0;
}

// How the LS marks its items (MODE without "g-"), and the words its marks go to.
class Marker {
 public:
  // False, with a line saying why, where the mode cannot run here.
  bool Init(const std::string& mode) {
    mode_ = mode;
    CHECK_RT(cudaHostAlloc(&host_, 4096, cudaHostAllocMapped));
    CHECK_RT(cudaHostGetDevicePointer(&host_dev_, host_, 0));
    CHECK_RT(cudaMalloc(&dev_, 4096));
    CHECK_RT(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming));
    if (mode_ == "write-host-nobar") {
      // The first stream-write entry point (before CUDA 11.7's _v2), which still takes
      // CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER, if the driver still exports it.
      void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      write_v1_ = h ? reinterpret_cast<WriteV1>(dlsym(h, "cuStreamWriteValue64")) : nullptr;
      if (write_v1_ == nullptr) {
        std::printf("ls mode %s: the driver exports no cuStreamWriteValue64 (v1)\n", mode_.c_str());
        return false;
      }
    }
    return true;
  }

  void Mark(cudaStream_t s) {
    ++seq_;
    const CUstream cs = reinterpret_cast<CUstream>(s);
    if (mode_ == "none") return;
    if (mode_ == "write-host") {
      CHECK_DRV(cuStreamWriteValue64(cs, reinterpret_cast<CUdeviceptr>(host_dev_), seq_, 0));
    } else if (mode_ == "write-host-nobar") {
      CHECK_DRV(write_v1_(cs, reinterpret_cast<CUdeviceptr>(host_dev_), seq_,
                          1 /* CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER */));
    } else if (mode_ == "write-dev") {
      CHECK_DRV(cuStreamWriteValue64(cs, reinterpret_cast<CUdeviceptr>(dev_), seq_, 0));
    } else if (mode_ == "event") {
      CHECK_RT(cudaEventRecord(ev_, s));
    } else if (mode_ == "kernel-host") {
      MarkKernel<<<1, 1, 0, s>>>(host_dev_, seq_);
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode_.c_str());
      std::exit(2);
    }
  }

  // After a synchronisation: whether the host sees the last mark (modes that write there).
  bool Landed() const {
    if (mode_ != "write-host" && mode_ != "write-host-nobar" && mode_ != "kernel-host") return true;
    return *reinterpret_cast<volatile unsigned long long*>(host_) == seq_;
  }
  unsigned long long marks() const { return seq_; }

 private:
  using WriteV1 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
  std::string mode_;
  unsigned long long* host_ = nullptr;
  unsigned long long* host_dev_ = nullptr;
  unsigned long long* dev_ = nullptr;
  cudaEvent_t ev_ = nullptr;
  WriteV1 write_v1_ = nullptr;
  unsigned long long seq_ = 0;
};

int RunLs(std::string mode, double seconds) {
  // "g-MODE": each token's kernels are one CUDA graph replay (as a decoding LS's are).
  const bool graph = mode.rfind("g-", 0) == 0;
  if (graph) mode = mode.substr(2);
  int sms = 0;
  CHECK_RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out = nullptr;
  CHECK_RT(cudaMalloc(&out, 1 << 20));
  int* token = nullptr;
  CHECK_RT(cudaHostAlloc(&token, 64, cudaHostAllocDefault));
  cudaStream_t s;
  CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Marker marker;
  if (!marker.Init(mode)) return 0;
  const int kernels = 24, blocks = sms / 4 > 0 ? sms / 4 : 1, iters = 3000;
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kernels; ++i) Burn<<<blocks, 128, 0, s>>>(out, iters);
    CHECK_RT(cudaStreamEndCapture(s, &g));
    CHECK_RT(cudaGraphInstantiate(&exec, g, 0));
  }
  const double start = Now();
  long tokens = 0;
  while (Now() - start < seconds) {
    if (graph) {
      CHECK_RT(cudaGraphLaunch(exec, s));
    } else {
      for (int i = 0; i < kernels; ++i) Burn<<<blocks, 128, 0, s>>>(out, iters);
    }
    marker.Mark(s);
    CHECK_RT(cudaMemcpyAsync(token, out, 4, cudaMemcpyDeviceToHost, s));
    marker.Mark(s);
    CHECK_RT(cudaStreamSynchronize(s));
    ++tokens;
  }
  const double t = Now() - start;
  if (!marker.Landed()) {
    std::printf("ls MISMATCH: the host does not see the last of %llu marks\n", marker.marks());
    return 1;
  }
  std::printf("ls mode %s%s tokens_per_s %.1f marks %llu\n", graph ? "g-" : "", mode.c_str(),
              tokens / t, marker.marks());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "be") == 0) {
    const std::string kind = argc >= 5 ? argv[4] : "burn";
    const int iters = argc >= 4 ? std::atoi(argv[3]) : (kind == "stream" ? 256 : 20000);
    if (iters <= 0) {
      std::fprintf(stderr, "ITERS must be positive\n");
      return 2;
    }
    return RunBe(std::atof(argv[2]), iters, kind);
  }
  if (argc >= 4 && std::strcmp(argv[1], "ls") == 0) return RunLs(argv[2], std::atof(argv[3]));
  std::fprintf(stderr, "usage: mark_cost be SECONDS [ITERS [burn|stream]] | mark_cost ls MODE SECONDS\n");
  return 2;
}

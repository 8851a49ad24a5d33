// Helpers for the fake driver's tests: checked CUDA calls, a primary context, forked children
// (each child gets a fresh fake driver state that re-reads the environment), SCM_RIGHTS.
// Includes entry_points.h, so the _ptds/_ptsz variants are declared and plain names such as
// cuGetProcAddress or cuEventElapsedTime name the oldest exported ABI, as in the library.
// Not thread-safe in itself; each test uses it from its main thread.

#ifndef MISSILE_TESTS_FAKECUDA_TEST_UTIL_H_
#define MISSILE_TESTS_FAKECUDA_TEST_UTIL_H_

#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "entry_points.h"  // declares every exported variant, _ptds/_ptsz included
#include "fakecuda/fakecuda.h"

namespace fakecuda_test {

inline std::string CuName(CUresult r) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  return name != nullptr ? name : ("CUresult " + std::to_string(static_cast<int>(r)));
}

// Each evaluates `expr` once.
#define CU_ASSERT(expr)                                            \
  do {                                                             \
    const CUresult cu_assert_rc = (expr);                          \
    ASSERT_EQ(CUDA_SUCCESS, cu_assert_rc)                          \
        << #expr << ": " << ::fakecuda_test::CuName(cu_assert_rc); \
  } while (0)
#define CU_EXPECT(expr)                                            \
  do {                                                             \
    const CUresult cu_expect_rc = (expr);                          \
    EXPECT_EQ(CUDA_SUCCESS, cu_expect_rc)                          \
        << #expr << ": " << ::fakecuda_test::CuName(cu_expect_rc); \
  } while (0)
#define CU_EXPECT_ERR(code, expr) EXPECT_EQ((code), (expr)) << #expr

// cuInit + the primary context of device 0 made current on the calling thread.
inline CUcontext InitPrimary(int device = 0) {
  EXPECT_EQ(CUDA_SUCCESS, cuInit(0));
  CUcontext ctx = nullptr;
  EXPECT_EQ(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&ctx, device));
  EXPECT_EQ(CUDA_SUCCESS, cuCtxSetCurrent(ctx));
  return ctx;
}

inline double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A name for a shared-memory state nobody else uses; removed by ShmGuard.
inline std::string UniqueShmName(const std::string& tag) {
  static int counter = 0;
  return "/fakecuda-test-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

struct ShmGuard {
  explicit ShmGuard(std::string n) : name(std::move(n)) {}
  ~ShmGuard() { shm_unlink(name.c_str()); }
  std::string name;
};

// Runs `body` in a forked child and returns at once with its pid. The child exits with body's
// return value (or 100 if gtest assertions failed in it). The child's fake driver starts afresh
// and reads the environment `body` sets before its first CUDA call.
inline pid_t ForkChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = body();
    if (code == 0 && ::testing::Test::HasFailure()) code = 100;
    std::fflush(nullptr);
    _exit(code);
  }
  return pid;
}

// The child's wait status.
inline int WaitChild(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// ForkChild + WaitChild.
inline int RunInChild(const std::function<int()>& body) { return WaitChild(ForkChild(body)); }

inline bool ExitedOk(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

inline bool SendFd(int sock, int fd, uint64_t payload = 0) {
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&payload, sizeof(payload)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  return sendmsg(sock, &msg, 0) == static_cast<ssize_t>(sizeof(payload));
}

inline int RecvFd(int sock, uint64_t* payload = nullptr) {
  char control[CMSG_SPACE(sizeof(int))] = {};
  uint64_t data = 0;
  iovec iov{&data, sizeof(data)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(sock, &msg, 0) != static_cast<ssize_t>(sizeof(data))) return -1;
  if (payload != nullptr) *payload = data;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg == nullptr || cmsg->cmsg_type != SCM_RIGHTS) return -1;
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return fd;
}

inline bool WriteU64(int fd, uint64_t v) { return write(fd, &v, sizeof(v)) == sizeof(v); }
inline uint64_t ReadU64(int fd) {
  uint64_t v = 0;
  return read(fd, &v, sizeof(v)) == sizeof(v) ? v : ~0ull;
}

inline CUmemAllocationProp DeviceProp(int device = 0, bool exportable = true) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes =
      exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

inline CUmemAccessDesc ReadWrite(int device = 0) {
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return desc;
}

inline constexpr size_t kTwoMiB = 2ull << 20;

}  // namespace fakecuda_test

#endif  // MISSILE_TESTS_FAKECUDA_TEST_UTIL_H_

#include "missile/common/shm_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace missile::shm {
namespace {

constexpr size_t kBytes = 8192;

TEST(ShmRegion, CreatedAtItsSizeForGood) {
  auto r = ShmRegion::Create("shm-test", kBytes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), kBytes);
  static_cast<char*>(r->data())[kBytes - 1] = 7;
  auto fd = r->Dup();
  ASSERT_TRUE(fd.ok());
  EXPECT_NE(ftruncate(*fd, 0), 0);  // a holder cannot make the mapping fault
  EXPECT_NE(ftruncate(*fd, kBytes * 2), 0);
  struct stat st;
  ASSERT_EQ(fstat(*fd, &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(kBytes));
  close(*fd);
  EXPECT_EQ(ShmRegion::Create("shm-test", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShmRegion, SealedWritesLeaveOnlyTheWritersMapping) {
  auto r = ShmRegion::Create("shm-test", kBytes);
  ASSERT_TRUE(r.ok());
  auto fd = r->Dup();
  ASSERT_TRUE(fd.ok());
  EXPECT_FALSE(ShmRegion::WritesSealed(*fd));
  ASSERT_TRUE(r->SealWrites().ok());
  ASSERT_TRUE(r->SealWrites().ok());  // again: nothing to add, no error
  EXPECT_TRUE(ShmRegion::WritesSealed(*fd));
  // Every other way to write fails, whoever holds a descriptor.
  EXPECT_EQ(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0), MAP_FAILED);
  const char byte = 1;
  EXPECT_NE(pwrite(*fd, &byte, 1, 0), 1);
  EXPECT_NE(fallocate(*fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  // A read-only mapping cannot be made writable.
  void* ro = mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, *fd, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_NE(mprotect(ro, kBytes, PROT_READ | PROT_WRITE), 0);
  // The writer's own mapping still writes, and readers see it.
  static_cast<char*>(r->data())[10] = 42;
  EXPECT_EQ(static_cast<const char*>(ro)[10], 42);
  munmap(ro, kBytes);
  close(*fd);
}

TEST(ShmRegion, AttachChecksTheSizeAndTheSizeSeals) {
  auto r = ShmRegion::Create("shm-test", kBytes);
  ASSERT_TRUE(r.ok());
  auto fd = r->Dup();
  ASSERT_TRUE(fd.ok());
  auto wrong = ShmRegion::Attach(*fd, kBytes / 2, Access::kReadOnly);  // takes the descriptor
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  fd = r->Dup();
  ASSERT_TRUE(fd.ok());
  auto ok = ShmRegion::Attach(*fd, kBytes, Access::kReadOnly);
  ASSERT_TRUE(ok.ok()) << ok.status();
  static_cast<char*>(r->data())[5] = 9;
  EXPECT_EQ(static_cast<const char*>(ok->data())[5], 9);
  // A file that can still shrink is refused: reading it could fault.
  const int loose = memfd_create("loose", MFD_CLOEXEC);
  ASSERT_GE(loose, 0);
  ASSERT_EQ(ftruncate(loose, kBytes), 0);
  EXPECT_EQ(ShmRegion::Attach(loose, kBytes, Access::kReadOnly).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ShmRegion::Attach(-1, kBytes, Access::kReadOnly).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShmRegion, MovesOwnership) {
  auto r = ShmRegion::Create("shm-test", kBytes);
  ASSERT_TRUE(r.ok());
  ShmRegion a = *std::move(r);
  const int fd = a.fd();
  ShmRegion b;
  b = std::move(a);
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(b.fd(), fd);
  b = ShmRegion();
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // closed
}

}  // namespace
}  // namespace missile::shm

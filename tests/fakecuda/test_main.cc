// Runs the fake driver's tests with a shared-memory state of their own: FAKECUDA_SHM names a
// file unique to this test process (ctest runs each test in its own process, possibly in
// parallel), so tests never share simulated links or physical frames with anything else. The
// file is removed at the end.

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string shm = "/fakecuda-test-fakecuda_test-" + std::to_string(getpid());
  setenv("FAKECUDA_SHM", shm.c_str(), 1);
  // Tests that need other settings set them in forked children.
  unsetenv("FAKECUDA_FAIL");
  unsetenv("FAKECUDA_PHYS_SHUFFLE");
  unsetenv("FAKECUDA_CHANNEL_MASKS");
  unsetenv("FAKECUDA_TOTAL_MEM");
  unsetenv("FAKECUDA_DEVICES");
  unsetenv("FAKECUDA_PCIE_BYTES_PER_US");
  const int result = RUN_ALL_TESTS();
  shm_unlink(shm.c_str());
  return result;
}

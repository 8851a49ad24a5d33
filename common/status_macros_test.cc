#include "missile/common/status_macros.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace missile {
namespace {

absl::Status Fails() { return absl::NotFoundError("gone"); }

absl::StatusOr<int> Value(int v) { return v; }
absl::StatusOr<int> NoValue() { return absl::DataLossError("torn"); }

absl::Status ReturnIfError(absl::Status s, int* reached) {
  MISSILE_RETURN_IF_ERROR(s);
  ++*reached;
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsTheStatusUnchanged) {
  int reached = 0;
  absl::Status error = absl::InvalidArgumentError("bad");
  error.SetPayload("type.example/detail", absl::Cord("x"));
  EXPECT_EQ(ReturnIfError(error, &reached), error);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(ReturnIfError(absl::OkStatus(), &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacrosTest, ReturnIfErrorEvaluatesOnce) {
  int calls = 0;
  auto count = [&calls]() {
    ++calls;
    return absl::OkStatus();
  };
  auto run = [&]() -> absl::Status {
    MISSILE_RETURN_IF_ERROR(count());
    return absl::OkStatus();
  };
  EXPECT_TRUE(run().ok());
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacrosTest, ReturnIfErrorInsideAStatusOrFunction) {
  auto run = []() -> absl::StatusOr<int> {
    MISSILE_RETURN_IF_ERROR(Fails());
    return 1;
  };
  EXPECT_EQ(run().status(), absl::NotFoundError("gone"));
}

TEST(StatusMacrosTest, ReturnIfErrorIsOneStatement) {
  auto run = [](bool check) -> absl::Status {
    if (check)
      MISSILE_RETURN_IF_ERROR(Fails());
    else
      return absl::OkStatus();
    return absl::InternalError("not reached");
  };
  EXPECT_EQ(run(true), absl::NotFoundError("gone"));
  EXPECT_TRUE(run(false).ok());
}

TEST(StatusMacrosTest, AssignOrReturnDeclares) {
  auto run = []() -> absl::StatusOr<int> {
    MISSILE_ASSIGN_OR_RETURN(int a, Value(2));
    MISSILE_ASSIGN_OR_RETURN(const int b, Value(3));  // two on distinct lines: distinct temps
    return a * b;
  };
  EXPECT_EQ(run().value(), 6);
}

TEST(StatusMacrosTest, AssignOrReturnAssignsAnExistingVariable) {
  int out = 0;
  auto run = [&out]() -> absl::Status {
    MISSILE_ASSIGN_OR_RETURN(out, Value(7));
    return absl::OkStatus();
  };
  EXPECT_TRUE(run().ok());
  EXPECT_EQ(out, 7);
}

TEST(StatusMacrosTest, AssignOrReturnReturnsTheStatusUnchanged) {
  int out = 0;
  auto into_status = [&out]() -> absl::Status {
    MISSILE_ASSIGN_OR_RETURN(out, NoValue());
    out = 99;
    return absl::OkStatus();
  };
  EXPECT_EQ(into_status(), absl::DataLossError("torn"));
  EXPECT_EQ(out, 0);
  auto into_other_statusor = []() -> absl::StatusOr<std::string> {
    MISSILE_ASSIGN_OR_RETURN(int v, NoValue());
    return std::to_string(v);
  };
  EXPECT_EQ(into_other_statusor().status(), absl::DataLossError("torn"));
}

TEST(StatusMacrosTest, AssignOrReturnMovesMoveOnlyValues) {
  auto make = []() -> absl::StatusOr<std::unique_ptr<int>> { return std::make_unique<int>(5); };
  auto run = [&make]() -> absl::StatusOr<int> {
    MISSILE_ASSIGN_OR_RETURN(std::unique_ptr<int> p, make());
    return *p;
  };
  EXPECT_EQ(run().value(), 5);
}

}  // namespace
}  // namespace missile

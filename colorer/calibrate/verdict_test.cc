#include "verdict.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "missile/colorer/classifier.h"

namespace missile::calibrate {
namespace {

VerdictInput Clean(int classes) {
  VerdictInput in;
  in.classified = true;
  in.classes = classes;
  in.confidence = 1.0;
  in.same_class = {0.48, 0.51, 0.50};
  in.different_class = {0.02, 0.05, 0.01};
  return in;
}

// The rule, from tables of measured slowdowns.
TEST(DecideColours, TableOfCases) {
  struct Case {
    const char* name;
    VerdictInput in;
    int colours;
    const char* reason_has;
  };
  std::vector<Case> cases;
  cases.push_back({"clean two classes", Clean(2), 2, "2 colours"});
  cases.push_back({"clean four classes", Clean(4), 4, "4 colours"});
  {
    VerdictInput in;
    in.failure = "budget spent";
    cases.push_back({"classifier did not finish", in, 1, "budget spent"});
  }
  {
    VerdictInput in = Clean(1);
    in.different_class.clear();
    cases.push_back({"one class (the H200)", in, 1, "every sampled chunk"});
  }
  {
    VerdictInput in = Clean(2);
    in.different_class = {0.30};  // well above half of the same-class minimum
    cases.push_back({"classes not separated", in, 1, "not well below"});
  }
  {
    VerdictInput in = Clean(2);
    in.same_class = {0.12};
    in.different_class = {0.04};  // ratio 0.33 is fine, but the gap is only 0.08
    cases.push_back({"gap too small", in, 1, "not well below"});
  }
  {
    VerdictInput in = Clean(2);
    in.merged_classes = 1;
    cases.push_back({"confirmation merged", in, 1, "not stable"});
  }
  {
    VerdictInput in = Clean(2);
    in.split_suspects = 1;
    cases.push_back({"class halves do not interfere", in, 1, "not stable"});
  }
  {
    VerdictInput in = Clean(2);
    in.confidence = 0.6;
    cases.push_back({"low confidence", in, 1, "confidence"});
  }
  {
    VerdictInput in = Clean(2);
    in.oracle_reaches_dram = false;
    cases.push_back({"probe served by L2", in, 1, "L2"});
  }
  {
    VerdictInput in = Clean(3);
    in.different_class.clear();
    cases.push_back({"nothing to compare", in, 1, "no same/different"});
  }
  for (const Case& c : cases) {
    const Verdict v = DecideColours(c.in);
    EXPECT_EQ(v.colours, c.colours) << c.name << ": " << v.reason;
    EXPECT_NE(v.reason.find(c.reason_has), std::string::npos) << c.name << ": " << v.reason;
  }
}

TEST(DecideColours, ReportsTheExtremes) {
  const Verdict v = DecideColours(Clean(2));
  EXPECT_DOUBLE_EQ(v.min_same, 0.48);
  EXPECT_DOUBLE_EQ(v.max_different, 0.05);
  VerdictInput empty;
  empty.failure = "x";
  EXPECT_TRUE(std::isnan(DecideColours(empty).min_same));
}

TEST(DecideColours, RuleIsAdjustable) {
  VerdictInput in = Clean(2);
  in.different_class = {0.30};
  VerdictRule loose;
  loose.max_ratio = 0.7;
  EXPECT_EQ(DecideColours(in, loose).colours, 2);
}

// A model oracle: chunk i has colour i % colours; same colour -> 0.5, different -> 0.
class ModelOracle : public colorer::InterferenceOracle {
 public:
  explicit ModelOracle(int colours) : colours_(colours) {}
  absl::StatusOr<double> Slowdown(const std::vector<colorer::ChunkIndex>& a,
                                  const std::vector<colorer::ChunkIndex>& b) override {
    for (colorer::ChunkIndex x : a) {
      for (colorer::ChunkIndex y : b) {
        if (static_cast<int>(x % colours_) == static_cast<int>(y % colours_)) return 0.5;
      }
    }
    return 0.0;
  }

 private:
  int colours_;
};

TEST(VerdictInputFrom, ClassifierResultToVerdict) {
  for (int colours : {1, 2, 3}) {
    ModelOracle oracle(colours);
    absl::StatusOr<colorer::ClassificationResult> r = colorer::ClassifyChunks(24, oracle);
    ASSERT_TRUE(r.ok()) << r.status();
    const VerdictInput in = VerdictInputFrom(*r);
    EXPECT_TRUE(in.classified);
    EXPECT_EQ(in.classes, colours);
    EXPECT_FALSE(in.same_class.empty());
    for (double x : in.same_class) EXPECT_DOUBLE_EQ(x, 0.5);
    for (double x : in.different_class) EXPECT_DOUBLE_EQ(x, 0.0);
    EXPECT_EQ(DecideColours(in).colours, colours);
  }
}

}  // namespace
}  // namespace missile::calibrate

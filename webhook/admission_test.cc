#include "admission.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_pods.h"

namespace missile::webhook {
namespace {

using test_pods::Annotated;
using test_pods::ReplicaPod;
using test_pods::ReviewOf;
using ::testing::HasSubstr;
using Verdict = ReviewOutcome::Verdict;

constexpr char kUid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";

ReviewOutcome Answer(const Json& review) {
  absl::StatusOr<ReviewOutcome> outcome = Review(MutationConfig(), review.dump());
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  return outcome.ok() ? *outcome : ReviewOutcome();
}

std::string BadRequest(std::string_view body) {
  absl::StatusOr<ReviewOutcome> outcome = Review(MutationConfig(), body);
  EXPECT_FALSE(outcome.ok());
  if (outcome.ok()) return "";
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(outcome.status().message());
}

Json DecodedPatch(const Json& response) {
  std::string text;
  EXPECT_TRUE(absl::Base64Unescape(response["patch"].get<std::string>(), &text));
  return Json::parse(text);
}

TEST(ReviewTest, MutatedPodAnswersWithItsPatchInBase64) {
  ReviewOutcome outcome = Answer(ReviewOf(ReplicaPod()));
  EXPECT_EQ(outcome.verdict, Verdict::kMutated);
  EXPECT_EQ(outcome.pod, "shop/web-7d4b9c-");
  const Json& review = outcome.review;
  EXPECT_EQ(review["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(review["kind"], "AdmissionReview");
  EXPECT_EQ(review["response"]["uid"], kUid);
  EXPECT_EQ(review["response"]["allowed"], true);
  EXPECT_EQ(review["response"]["patchType"], "JSONPatch");
  EXPECT_EQ(DecodedPatch(review["response"]),
            MutatePod(MutationConfig(), ReplicaPod(), "shop").value());
  EXPECT_EQ(DecodedPatch(review["response"]), outcome.patch);
}

TEST(ReviewTest, DeniedPodAnswersNotAllowedWithTheReason) {
  ReviewOutcome outcome = Answer(ReviewOf(ReplicaPod("xl")));
  EXPECT_EQ(outcome.verdict, Verdict::kDenied);
  EXPECT_EQ(outcome.message, "missile.io/class: 'xl' is not ls or be");
  const Json& response = outcome.review["response"];
  EXPECT_EQ(response["uid"], kUid);
  EXPECT_EQ(response["allowed"], false);
  EXPECT_EQ(response["status"]["message"], "missile.io/class: 'xl' is not ls or be");
  EXPECT_EQ(response["status"]["code"], 400);
  EXPECT_FALSE(response.contains("patch"));
}

TEST(ReviewTest, TenantAlreadyAnswersWithoutPatch) {
  Json mutated = ReplicaPod().patch(Answer(ReviewOf(ReplicaPod())).patch);
  ReviewOutcome outcome = Answer(ReviewOf(mutated));
  EXPECT_EQ(outcome.verdict, Verdict::kUnchanged);
  EXPECT_EQ(outcome.review["response"], Json({{"uid", kUid}, {"allowed", true}}));
}

TEST(ReviewTest, OthersAreAllowedUntouched) {
  Json plain = ReplicaPod();
  plain["metadata"].erase("annotations");
  const Json allowed = {{"uid", kUid}, {"allowed", true}};
  for (const Json& review :
       {ReviewOf(plain), ReviewOf(ReplicaPod(), "UPDATE"),
        ReviewOf(ReplicaPod(), "CREATE", "Deployment"), ReviewOf(ReplicaPod("xl"), "DELETE")}) {
    ReviewOutcome outcome = Answer(review);
    EXPECT_EQ(outcome.verdict, Verdict::kIgnored) << review.dump();
    EXPECT_EQ(outcome.review["response"], allowed) << review.dump();
  }
}

TEST(ReviewTest, NamespaceFromThePodWhenTheRequestHasNone) {
  Json pod = ReplicaPod();
  pod["metadata"]["namespace"] = "lab";
  Json review = ReviewOf(pod);
  review["request"].erase("namespace");
  ReviewOutcome outcome = Answer(review);
  EXPECT_EQ(outcome.pod, "lab/web-7d4b9c-");
  EXPECT_THAT(outcome.patch.dump(), HasSubstr("\"lab.web\""));
}

TEST(ReviewTest, BodiesThatAreNotReviewsAreBadRequests) {
  EXPECT_THAT(BadRequest("{\"apiVersion\":"), HasSubstr("the body is not valid JSON: "));
  EXPECT_THAT(BadRequest(""), HasSubstr("the body is not valid JSON"));
  EXPECT_EQ(BadRequest("[1, 2]"), "the body is not a JSON object");
  Json review = ReviewOf(ReplicaPod());
  review["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_EQ(BadRequest(review.dump()), "the body is not an AdmissionReview of admission.k8s.io/v1");
  review = ReviewOf(ReplicaPod());
  review["request"].erase("uid");
  EXPECT_EQ(BadRequest(review.dump()), "the review's request has no uid");
  review["request"]["uid"] = 42;
  EXPECT_EQ(BadRequest(review.dump()), "the review's request has no uid");
  review.erase("request");
  EXPECT_EQ(BadRequest(review.dump()), "the review has no request");
  review = ReviewOf(ReplicaPod());
  review["request"].erase("object");
  EXPECT_EQ(BadRequest(review.dump()), "the review's request has no object");
}

TEST(ReviewTest, DeepNestingIsRefusedBeforeParsing) {
  std::string deep = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_EQ(BadRequest(deep), "the body nests deeper than 100 levels");
  // Brackets inside strings do not count.
  Json pod = Annotated(ReplicaPod("xl"), "note", std::string(500, '[') + "\\\"{");
  EXPECT_EQ(Answer(ReviewOf(pod)).verdict, Verdict::kDenied);
}

TEST(ReviewTest, VerdictNames) {
  EXPECT_STREQ(VerdictName(Verdict::kIgnored), "ignored");
  EXPECT_STREQ(VerdictName(Verdict::kUnchanged), "unchanged");
  EXPECT_STREQ(VerdictName(Verdict::kMutated), "mutated");
  EXPECT_STREQ(VerdictName(Verdict::kDenied), "denied");
}

}  // namespace
}  // namespace missile::webhook

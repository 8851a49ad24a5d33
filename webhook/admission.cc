#include "admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "missile/common/status_macros.h"

namespace missile::webhook {
namespace {

// Deeper than any Kubernetes object nests; a deeper body is refused before it is parsed.
constexpr int kMaxDepth = 100;

// The deepest nesting of arrays and objects in JSON text (outside strings).
int NestingDepth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<Json> ParseBody(std::string_view body) {
  if (NestingDepth(body) > kMaxDepth) {
    return absl::InvalidArgumentError("the body nests deeper than " + std::to_string(kMaxDepth) +
                                      " levels");
  }
  Json review;
  try {
    review = Json::parse(body);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!review.is_object()) return absl::InvalidArgumentError("the body is not a JSON object");
  if (StringMember(review, "apiVersion") != kAdmissionApiVersion ||
      StringMember(review, "kind") != kAdmissionKind) {
    return absl::InvalidArgumentError(std::string("the body is not an ") + kAdmissionKind + " of " +
                                      kAdmissionApiVersion);
  }
  const Json* request = ObjectMember(review, "request");
  if (request == nullptr) return absl::InvalidArgumentError("the review has no request");
  if (StringMember(*request, "uid").empty()) {
    return absl::InvalidArgumentError("the review's request has no uid");
  }
  return review;
}

bool IsPodCreate(const Json& request) {
  const Json* kind = ObjectMember(request, "kind");
  return kind != nullptr && StringMember(*kind, "group").empty() &&
         StringMember(*kind, "kind") == "Pod" && StringMember(request, "operation") == "CREATE";
}

std::string PodName(const Json& pod, const std::string& namespace_name) {
  const Json* metadata = ObjectMember(pod, "metadata");
  std::string name = metadata ? StringMember(*metadata, "name") : "";
  if (name.empty() && metadata) name = StringMember(*metadata, "generateName");
  return namespace_name + "/" + (name.empty() ? "?" : name);
}

Json Response(const std::string& uid, ReviewOutcome& outcome) {
  Json response{{"uid", uid}, {"allowed", outcome.verdict != ReviewOutcome::Verdict::kDenied}};
  if (outcome.verdict == ReviewOutcome::Verdict::kDenied) {
    response["status"] = Json{{"code", 400}, {"message", outcome.message}};
  } else if (outcome.verdict == ReviewOutcome::Verdict::kMutated) {
    response["patchType"] = "JSONPatch";
    response["patch"] = absl::Base64Escape(outcome.patch.dump());
  }
  return Json{{"apiVersion", kAdmissionApiVersion},
              {"kind", kAdmissionKind},
              {"response", std::move(response)}};
}

}  // namespace

absl::StatusOr<ReviewOutcome> Review(const MutationConfig& config, std::string_view body) {
  MISSILE_ASSIGN_OR_RETURN(Json review, ParseBody(body));
  const Json& request = (review)["request"];
  const std::string uid = StringMember(request, "uid");
  ReviewOutcome outcome;
  if (IsPodCreate(request)) {
    const Json* pod = ObjectMember(request, "object");
    if (pod == nullptr) return absl::InvalidArgumentError("the review's request has no object");
    std::string namespace_name = StringMember(request, "namespace");
    if (namespace_name.empty() && ObjectMember(*pod, "metadata") != nullptr) {
      namespace_name = StringMember((*pod)["metadata"], "namespace");
    }
    outcome.pod = PodName(*pod, namespace_name);
    if (WantsTenant(*pod)) {
      absl::StatusOr<Json> patch = MutatePod(config, *pod, namespace_name);
      if (!patch.ok()) {
        outcome.verdict = ReviewOutcome::Verdict::kDenied;
        outcome.message = std::string(patch.status().message());
      } else {
        outcome.verdict =
            patch->empty() ? ReviewOutcome::Verdict::kUnchanged : ReviewOutcome::Verdict::kMutated;
        outcome.patch = std::move(*patch);
      }
    }
  }
  outcome.review = Response(uid, outcome);
  return outcome;
}

const char* VerdictName(ReviewOutcome::Verdict verdict) {
  switch (verdict) {
    case ReviewOutcome::Verdict::kIgnored:
      return "ignored";
    case ReviewOutcome::Verdict::kUnchanged:
      return "unchanged";
    case ReviewOutcome::Verdict::kMutated:
      return "mutated";
    case ReviewOutcome::Verdict::kDenied:
      return "denied";
  }
  return "?";
}

}  // namespace missile::webhook

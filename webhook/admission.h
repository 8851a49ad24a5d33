// Kubernetes AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out: the webhook's
// whole answer to one POST /mutate, without HTTP.
//
// A Pod being created that carries missile.io/class is mutated (pod_mutation.h): the
// response allows it with a base64 JSON Patch, or without one when there is nothing to add,
// or refuses it with the reason. Any other object or operation is allowed untouched.
// Thread safety: plain values and pure functions.
#ifndef MISSILE_WEBHOOK_ADMISSION_H_
#define MISSILE_WEBHOOK_ADMISSION_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "json_patch.h"
#include "pod_mutation.h"

namespace missile::webhook {

inline constexpr char kAdmissionApiVersion[] = "admission.k8s.io/v1";
inline constexpr char kAdmissionKind[] = "AdmissionReview";

// What happened to one review, for the log and the tests.
struct ReviewOutcome {
  enum class Verdict {
    kIgnored,    // not a Pod CREATE, or a pod without missile.io/class: allowed untouched
    kUnchanged,  // the pod is a tenant already: allowed with no patch
    kMutated,    // allowed with a patch
    kDenied,     // refused; `message` says why
  };
  Verdict verdict = Verdict::kIgnored;
  std::string pod;      // "<namespace>/<name or generateName>", for the log
  std::string message;  // the denial's reason
  Json patch;           // the JSON Patch of kMutated
  Json review;          // the AdmissionReview to send back
};

// The answer to `body`. INVALID_ARGUMENT when the body is not an AdmissionReview v1 with a
// request.uid (the server answers HTTP 400 with the message).
absl::StatusOr<ReviewOutcome> Review(const MutationConfig& config, std::string_view body);

const char* VerdictName(ReviewOutcome::Verdict verdict);

}  // namespace missile::webhook

#endif  // MISSILE_WEBHOOK_ADMISSION_H_

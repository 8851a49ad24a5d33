// Pods and AdmissionReviews for the webhook's tests, as the API server sends them.
#ifndef MISSILE_WEBHOOK_TEST_PODS_H_
#define MISSILE_WEBHOOK_TEST_PODS_H_

#include <string>

#include "json_patch.h"

namespace missile::webhook::test_pods {

// A Deployment's replica being created: generateName "web-7d4b9c-" with its
// pod-template-hash label, no name yet, annotated class `cls`, one container "app".
inline Json ReplicaPod(const std::string& cls = "ls") {
  return Json::parse(R"({
    "metadata": {
      "generateName": "web-7d4b9c-",
      "labels": {"app": "web", "pod-template-hash": "7d4b9c"},
      "annotations": {"missile.io/class": ")" +
                     cls + R"("}
    },
    "spec": {
      "containers": [{"name": "app", "image": "serve:1"}]
    }
  })");
}

// `pod` with annotation `key` set to `value`.
inline Json Annotated(Json pod, const std::string& key, const std::string& value) {
  pod["metadata"]["annotations"][key] = value;
  return pod;
}

// An AdmissionReview v1 of `operation` on `object` (a Pod unless `kind` says otherwise).
inline Json ReviewOf(const Json& object, const std::string& operation = "CREATE",
                     const std::string& kind = "Pod") {
  return Json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", kind}}},
                {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                {"namespace", "shop"},
                {"operation", operation},
                {"object", object}}}};
}

}  // namespace missile::webhook::test_pods

#endif  // MISSILE_WEBHOOK_TEST_PODS_H_

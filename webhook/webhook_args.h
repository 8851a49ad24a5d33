// missile-webhook's command line. Thread safety: plain values and pure functions.
#ifndef MISSILE_WEBHOOK_WEBHOOK_ARGS_H_
#define MISSILE_WEBHOOK_WEBHOOK_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pod_mutation.h"

namespace missile::webhook {

struct WebhookArgs {
  bool help = false;
  bool version = false;
  std::string listen_host = "0.0.0.0";  // without brackets for IPv6 ("::")
  int listen_port = 8443;
  std::string tls_cert;  // PEM certificate (chain) the server presents
  std::string tls_key;   // its PEM private key
  MutationConfig mutation;
};

inline constexpr char kWebhookUsage[] =
    R"(usage: missile-webhook --tls-cert FILE --tls-key FILE [options]

A Kubernetes mutating admission webhook (admission.k8s.io/v1) that makes the containers of pods
annotated missile.io/class Missile tenants: it injects the shim (LD_PRELOAD), the tenant's class,
quota and name, missiled's socket and the pod's identity, mounts the shim and socket directories
and adds the socket's group. Serves HTTPS: POST /mutate (AdmissionReview), GET /healthz.

options:
  --listen ADDR:PORT   where to serve HTTPS (0.0.0.0:8443; IPv6 as [::]:8443)
  --tls-cert FILE      the server's certificate, PEM (required)
  --tls-key FILE       the certificate's private key, PEM (required)
  --shim-dir DIR       the shim bundle (holding libmissile.so) on the nodes, mounted at the same
                       path in tenants (/opt/missile/shim)
  --socket-dir DIR     the directory of missiled's socket on the nodes, mounted at the same path
                       in tenants (/run/missile)
  --socket-gid N       the group of missiled's socket, added to tenant pods'
                       supplementalGroups (2046)
  --version            print the version and exit
  -h, --help           this text

Annotations of a pod: missile.io/class (ls or be; required for the pod to be mutated),
missile.io/quota (a size with a unit, e.g. 8GiB), missile.io/tenant (the tenant's name;
default: <namespace>.<owner>), missile.io/containers (a comma list; default: every container).
Runs until SIGTERM or SIGINT.
)";

// "--flag VALUE" or "--flag=VALUE" for each option. INVALID_ARGUMENT, naming the option (with
// a suggestion for a mistyped one), for anything wrong; the TLS files are required unless
// --help or --version is given, but are not opened here.
absl::StatusOr<WebhookArgs> ParseWebhookArgs(const std::vector<std::string>& args);

}  // namespace missile::webhook

#endif  // MISSILE_WEBHOOK_WEBHOOK_ARGS_H_

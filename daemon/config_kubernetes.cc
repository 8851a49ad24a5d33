// [kubernetes]: the kubelet's pod-resources socket. Only its form is checked here (an absolute
// path that fits a Unix socket address): the kubelet may start after missiled, so a socket not
// there yet is not an error.
#include <string>

#include "daemon/internal/config_parser.h"

namespace missile::daemon::config_internal {

void Parser::ParseKubernetes(const toml::node& node, const std::string& path) {
  KubernetesSection& k = c_->kubernetes;
  Table(node, path, {{"pod_resources_socket", [&](Node n, Key key) {
                        std::string v;
                        if (GetString(n, key, &v) &&
                            CheckAbsolutePath(n, key, v, true, kMaxSocketPathBytes)) {
                          k.pod_resources_socket = v;
                        }
                      }}});
}

}  // namespace missile::daemon::config_internal

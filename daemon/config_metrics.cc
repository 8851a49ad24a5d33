// [metrics]: the Prometheus endpoint's keys. The address must be an IP address literal (no
// host names: the daemon resolves nothing at start), so a typo is caught here, not at bind.
#include <arpa/inet.h>

#include <string>

#include "daemon/internal/config_parser.h"
#include "missile/common/quote.h"

namespace missile::daemon::config_internal {
namespace {

bool IsAddressLiteral(const std::string& text) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

}  // namespace

void Parser::ParseMetrics(const toml::node& node, const std::string& path) {
  MetricsSection& m = c_->metrics;
  Table(node, path,
        {{"enabled", [&](Node n, Key k) { GetBool(n, k, &m.enabled); }},
         {"address",
          [&](Node n, Key k) {
            std::string v;
            if (!GetString(n, k, &v)) return;
            if (!IsAddressLiteral(v)) {
              Fail(n, k,
                   absl::StrCat("must be an IPv4 or IPv6 address such as \"127.0.0.1\" or "
                                "\"::1\" (no host names), got ",
                                QuoteString(v)));
              return;
            }
            m.address = v;
          }},
         {"port", [&](Node n, Key k) { GetInt(n, k, 1, 65535, &m.port); }}});
}

}  // namespace missile::daemon::config_internal

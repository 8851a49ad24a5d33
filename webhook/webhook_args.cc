#include "webhook_args.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

#include "absl/strings/numbers.h"
#include "flags.h"
#include "missile/common/status_macros.h"
#include "missile/flags/suggest.h"

namespace missile::webhook {
namespace {

constexpr std::string_view kOptions[] = {"--listen",     "--tls-cert",   "--tls-key", "--shim-dir",
                                         "--socket-dir", "--socket-gid", "--version", "--help"};

absl::Status Invalid(std::string_view flag, const std::string& why) {
  return absl::InvalidArgumentError(std::string(flag) + ": " + why);
}

absl::Status ParseListen(const std::string& text, WebhookArgs& out) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return Invalid("--listen", "'" + text + "' is not ADDR:PORT");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return Invalid("--listen", "'" + text + "': write an IPv6 address in brackets ([::]:8443)");
  }
  if (host.empty()) return Invalid("--listen", "'" + text + "' has no address");
  int port = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return Invalid("--listen", "'" + text + "' has no port from 1 to 65535");
  }
  out.listen_host = host;
  out.listen_port = port;
  return absl::OkStatus();
}

// An absolute directory that LD_PRELOAD and a hostPath can carry, without a trailing '/'.
absl::StatusOr<std::string> ParseDir(std::string_view flag, std::string dir) {
  if (dir.empty() || dir.front() != '/') return Invalid(flag, "'" + dir + "' is not absolute");
  for (char c : dir) {
    if (c == ':' || std::isspace(static_cast<unsigned char>(c))) {
      return Invalid(flag, "'" + dir + "' holds ':' or a space, which LD_PRELOAD cannot carry");
    }
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

absl::Status ParseGid(const std::string& text, WebhookArgs& out) {
  int64_t gid = 0;
  if (!absl::SimpleAtoi(text, &gid) || gid < 0 || gid > 4294967294) {
    return Invalid("--socket-gid", "'" + text + "' is not a group id from 0 to 4294967294");
  }
  out.mutation.socket_gid = gid;
  return absl::OkStatus();
}

// The value of one option into `out`.
absl::Status Apply(const std::string& flag, const std::string& value, WebhookArgs& out) {
  if (value.empty()) return Invalid(flag, "empty value");
  if (flag == "--listen") return ParseListen(value, out);
  if (flag == "--tls-cert") {
    out.tls_cert = value;
  } else if (flag == "--tls-key") {
    out.tls_key = value;
  } else if (flag == "--socket-gid") {
    return ParseGid(value, out);
  } else {
    MISSILE_ASSIGN_OR_RETURN(std::string dir, ParseDir(flag, value));
    (flag == "--shim-dir" ? out.mutation.shim_dir : out.mutation.socket_dir) = dir;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WebhookArgs> ParseWebhookArgs(const std::vector<std::string>& args) {
  WebhookArgs out;
  std::vector<std::string> seen;
  cli::ArgReader reader(args);
  while (!reader.Done()) {
    std::string flag(reader.CurrentName());
    if (flag == "-h" || flag == "--help" || flag == "--version") {
      MISSILE_RETURN_IF_ERROR(reader.TakeSwitch());
      (flag == "--version" ? out.version : out.help) = true;
      continue;
    }
    if (!flag.starts_with("-"))
      return absl::InvalidArgumentError("unexpected argument '" + flag + "'");
    if (std::find(std::begin(kOptions), std::end(kOptions), flag) == std::end(kOptions)) {
      return absl::InvalidArgumentError(
          "unknown option '" + flag + "'" +
          flags::DidYouMean(
              flag, std::vector<std::string_view>(std::begin(kOptions), std::end(kOptions))));
    }
    if (std::find(seen.begin(), seen.end(), flag) != seen.end()) {
      return absl::InvalidArgumentError(flag + " given twice");
    }
    seen.push_back(flag);
    MISSILE_ASSIGN_OR_RETURN(std::string value, reader.TakeValue());
    MISSILE_RETURN_IF_ERROR(Apply(flag, value, out));
  }
  if (out.help || out.version) return out;
  if (out.tls_cert.empty()) return absl::InvalidArgumentError("--tls-cert FILE is required");
  if (out.tls_key.empty()) return absl::InvalidArgumentError("--tls-key FILE is required");
  return out;
}

}  // namespace missile::webhook

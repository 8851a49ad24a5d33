#include "webhook_args.h"

#include <cctype>
#include <cstdint>
#include <string_view>

#include "absl/strings/numbers.h"
#include "missile/common/status_macros.h"
#include "missile/flags/parse.h"

namespace missile::webhook {
namespace {

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

}  // namespace

absl::StatusOr<WebhookArgs> ParseWebhookArgs(const std::vector<std::string>& args) {
  WebhookArgs out;
  std::string listen, gid, shim_dir, socket_dir;
  CLI::App app;
  flags::Configure(app);
  app.add_flag("-h,--help", out.help);
  app.add_flag("--version", out.version);
  const std::vector<CLI::Option*> options = {
      app.add_option("--listen", listen),         app.add_option("--tls-cert", out.tls_cert),
      app.add_option("--tls-key", out.tls_key),   app.add_option("--shim-dir", shim_dir),
      app.add_option("--socket-dir", socket_dir), app.add_option("--socket-gid", gid)};
  MISSILE_RETURN_IF_ERROR(flags::Parse(app, args));
  for (const CLI::Option* option : options) {
    MISSILE_RETURN_IF_ERROR(flags::GivenOnce({option}));
    if (option->count() > 0 && option->as<std::string>().empty()) {
      return Invalid(option->get_name(), "empty value");
    }
  }
  if (options[0]->count() > 0) MISSILE_RETURN_IF_ERROR(ParseListen(listen, out));
  if (options[3]->count() > 0) {
    MISSILE_ASSIGN_OR_RETURN(out.mutation.shim_dir, ParseDir("--shim-dir", shim_dir));
  }
  if (options[4]->count() > 0) {
    MISSILE_ASSIGN_OR_RETURN(out.mutation.socket_dir, ParseDir("--socket-dir", socket_dir));
  }
  if (options[5]->count() > 0) MISSILE_RETURN_IF_ERROR(ParseGid(gid, out));
  if (out.help || out.version) return out;
  if (out.tls_cert.empty()) return absl::InvalidArgumentError("--tls-cert FILE is required");
  if (out.tls_key.empty()) return absl::InvalidArgumentError("--tls-key FILE is required");
  return out;
}

}  // namespace missile::webhook

#include "server.h"

#include <sys/socket.h>

#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "admission.h"
#include "httplib.h"
#include "missile/common/status_macros.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "tls_files.h"

namespace missile::webhook {
namespace {

spdlog::logger& Log() {
  static auto* logger = [] {
    auto* l =
        new spdlog::logger("missile-webhook", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("missile-webhook %l: %v");
    return l;
  }();
  return *logger;
}

void BadRequest(httplib::Response& res, const std::string& why) {
  res.status = 400;
  res.set_content(why + "\n", "text/plain");
}

void LogOutcome(const ReviewOutcome& outcome) {
  switch (outcome.verdict) {
    case ReviewOutcome::Verdict::kIgnored:
      Log().debug("ignored a review of {}", outcome.pod.empty() ? "a non-pod" : outcome.pod);
      break;
    case ReviewOutcome::Verdict::kUnchanged:
      Log().info("pod {}: a tenant already, nothing to add", outcome.pod);
      break;
    case ReviewOutcome::Verdict::kMutated:
      Log().info("pod {}: mutated ({} patch operations)", outcome.pod, outcome.patch.size());
      break;
    case ReviewOutcome::Verdict::kDenied:
      Log().info("pod {}: denied: {}", outcome.pod, outcome.message);
      break;
  }
}

void HandleMutate(const MutationConfig& config, const httplib::Request& req,
                  httplib::Response& res) {
  absl::StatusOr<ReviewOutcome> outcome = Review(config, req.body);
  if (!outcome.ok()) {
    std::string why(outcome.status().message());
    Log().warn("POST /mutate from {}: HTTP 400: {}", req.remote_addr, why);
    BadRequest(res, why);
    return;
  }
  LogOutcome(*outcome);
  res.set_content(outcome->review.dump(-1, ' ', false, Json::error_handler_t::replace),
                  "application/json");
}

// Errors the library answers itself get a body that says what they are; a body over the
// limit is a bad request like any other that is not an AdmissionReview.
httplib::Server::HandlerResponse HandleError(const httplib::Request& req, httplib::Response& res) {
  if (res.status == 413) {
    BadRequest(res, "the body is over the limit of " + std::to_string(kMaxBodyBytes) + " bytes");
    Log().warn("{} {} from {}: HTTP 400: body over the limit", req.method, req.path,
               req.remote_addr);
    return httplib::Server::HandlerResponse::Handled;
  }
  if (res.body.empty()) {
    res.set_content(
        std::to_string(res.status) + " (this server answers POST /mutate and GET " + "/healthz)\n",
        "text/plain");
  }
  return httplib::Server::HandlerResponse::Handled;
}

}  // namespace

WebhookServer::WebhookServer(WebhookArgs args) : args_(std::move(args)) {}

WebhookServer::~WebhookServer() { Stop(); }

void WebhookServer::AddRoutes() {
  server_->Post("/mutate", [this](const httplib::Request& req, httplib::Response& res) {
    HandleMutate(args_.mutation, req, res);
  });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server_->set_error_handler(httplib::Server::HandlerWithResponse(HandleError));
  server_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Log().error("{} {}: {}", req.method, req.path, what);
        res.status = 500;
        res.set_content("internal error: " + what + "\n", "text/plain");
      });
}

absl::Status WebhookServer::Start() {
  MISSILE_RETURN_IF_ERROR(CheckTlsFiles(args_.tls_cert, args_.tls_key));
  server_ = std::make_unique<httplib::SSLServer>(args_.tls_cert.c_str(), args_.tls_key.c_str());
  if (!server_->is_valid()) {
    return absl::InvalidArgumentError("cannot set up TLS with --tls-cert " + args_.tls_cert +
                                      " and --tls-key " + args_.tls_key);
  }
  server_->set_payload_max_length(kMaxBodyBytes);
  // SO_REUSEADDR alone: the library's default adds SO_REUSEPORT, with which a second server
  // binds a port already served and takes a share of its connections instead of failing.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  AddRoutes();
  if (!server_->bind_to_port(args_.listen_host, args_.listen_port)) {
    return absl::UnavailableError("cannot listen on " + args_.listen_host + ":" +
                                  std::to_string(args_.listen_port));
  }
  serving_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  // Stop has no effect on a server not yet running, which would then serve on: wait for it.
  while (!server_->is_running() && !listen_returned_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (listen_returned_) {
    return absl::InternalError("stopped serving on " + args_.listen_host + ":" +
                               std::to_string(args_.listen_port) + " at once");
  }
  Log().info("serving HTTPS on {}:{} (shim {}, socket {}, socket group {})", args_.listen_host,
             args_.listen_port, args_.mutation.ShimPath(), args_.mutation.SocketPath(),
             args_.mutation.socket_gid);
  return absl::OkStatus();
}

void WebhookServer::Stop() {
  if (server_ != nullptr && server_->is_running()) Log().info("stopping");
  if (server_ != nullptr) server_->stop();
  if (serving_.joinable()) serving_.join();
}

}  // namespace missile::webhook

#include "gpu_source.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "missile/v1/missile.grpc.pb.h"

namespace missile::deviceplugin {

namespace {

// A restarted missiled is seen within about a second, not after gRPC's default reconnect
// backoff (up to two minutes).
std::shared_ptr<grpc::Channel> DialUnix(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
}

class MissiledGpuSource : public GpuSource {
 public:
  MissiledGpuSource(const std::string& socket, std::chrono::milliseconds timeout)
      : socket_(socket),
        timeout_(timeout),
        stub_(v1::Admin::NewStub(DialUnix(socket))) {}

  absl::StatusOr<std::vector<GpuRef>> ListGpus() override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout_);
    v1::StatusResponse response;
    grpc::Status status = stub_->Status(&context, v1::StatusRequest(), &response);
    if (!status.ok()) {
      return absl::UnavailableError(
          absl::StrCat("missiled at ", socket_, " does not answer: ", status.error_message()));
    }
    std::vector<GpuRef> gpus;
    for (const v1::PoolStatus& pool : response.pools()) {
      gpus.push_back(GpuRef{pool.gpu().index(), pool.gpu().uuid(), pool.capacity_bytes()});
    }
    return gpus;
  }

 private:
  const std::string socket_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<v1::Admin::Stub> stub_;
};

}  // namespace

std::unique_ptr<GpuSource> MakeMissiledGpuSource(const std::string& socket,
                                                 std::chrono::milliseconds timeout) {
  return std::make_unique<MissiledGpuSource>(socket, timeout);
}

}  // namespace missile::deviceplugin

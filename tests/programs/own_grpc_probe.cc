// own_grpc_probe: a tenant that brings its own gRPC and protobuf (Debian's shared libgrpc++ and
// libprotobuf, as a Python grpcio or a serving stack would), to run under libmissile.so. It
// checks that its own copies and the shim's work side by side in one process:
//   1. serializes and parses a message of its own (own_grpc_probe.proto): "proto ok";
//   2. serves its own Echo service on a Unix socket and calls it over an insecure channel:
//      "echo ok";
//   3. through the driver, hence the shim and the daemon: allocates 16 MiB, copies a pattern
//      host to device and back (scheduled copies: above the bypass size) and compares:
//      "cuda ok" (or "cuda err <step> <code>");
//   4. calls its Echo service again, with the shim's session open: "echo again ok";
//   5. prints "ready" and waits until stdin closes (the test looks at the daemon meanwhile),
//      then frees the memory, calls Echo a third time and prints "done".
// usage: own_grpc_probe ECHO_SOCKET_PATH
// Exit status 0 only if every step passed.
#include <cuda.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "own_grpc_probe.grpc.pb.h"

namespace {

class EchoService final : public missile_probe::Echo::Service {
  grpc::Status Say(grpc::ServerContext*, const missile_probe::Note* in,
                   missile_probe::Note* out) override {
    *out = *in;
    out->set_text("echo: " + in->text());
    return grpc::Status::OK;
  }
};

bool ProtoRoundTrip() {
  missile_probe::Note note;
  note.set_text("tenant's own message");
  for (uint64_t v = 1; v <= 5; ++v) note.add_values(v * 1000003);
  std::string wire;
  if (!note.SerializeToString(&wire)) return false;
  missile_probe::Note back;
  return back.ParseFromString(wire) && back.text() == note.text() && back.values_size() == 5 &&
         back.values(4) == 5 * 1000003;
}

bool Echo(missile_probe::Echo::Stub* stub, const std::string& text) {
  missile_probe::Note req;
  req.set_text(text);
  req.add_values(42);
  missile_probe::Note resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = stub->Say(&ctx, req, &resp);
  if (!s.ok()) {
    printf("echo failed: %s\n", s.error_message().c_str());
    return false;
  }
  return resp.text() == "echo: " + text && resp.values_size() == 1 && resp.values(0) == 42;
}

// Step 3: returns "" on success, else the failing step and code.
std::string CudaSteps(CUdeviceptr* out) {
  CUdevice dev;
  CUcontext ctx;
  CUresult r = cuInit(0);
  if (r == CUDA_SUCCESS) r = cuDeviceGet(&dev, 0);
  if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&ctx, dev);
  if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
  if (r != CUDA_SUCCESS) return "init " + std::to_string(r);
  const size_t bytes = size_t{16} << 20;
  CUdeviceptr p = 0;
  if ((r = cuMemAlloc_v2(&p, bytes)) != CUDA_SUCCESS) return "alloc " + std::to_string(r);
  *out = p;
  std::vector<uint32_t> host(bytes / 4), back(bytes / 4, 0);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i * 2654435761u);
  if ((r = cuMemcpyHtoD_v2(p, host.data(), bytes)) != CUDA_SUCCESS) {
    return "htod " + std::to_string(r);
  }
  if ((r = cuMemcpyDtoH_v2(back.data(), p, bytes)) != CUDA_SUCCESS) {
    return "dtoh " + std::to_string(r);
  }
  if (back != host) return "compare 0";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc != 2) {
    fprintf(stderr, "usage: %s ECHO_SOCKET_PATH\n", argv[0]);
    return 2;
  }
  bool ok = ProtoRoundTrip();
  printf("proto %s\n", ok ? "ok" : "failed");

  EchoService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("unix:") + argv[1], grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    printf("echo server failed to start\n");
    return 1;
  }
  auto stub = missile_probe::Echo::NewStub(
      grpc::CreateChannel(std::string("unix:") + argv[1], grpc::InsecureChannelCredentials()));
  bool echo = Echo(stub.get(), "before the driver");
  printf("echo %s\n", echo ? "ok" : "failed");
  ok = ok && echo;

  CUdeviceptr p = 0;
  std::string cuda = CudaSteps(&p);
  printf("cuda %s\n", cuda.empty() ? "ok" : ("err " + cuda).c_str());
  ok = ok && cuda.empty();

  echo = Echo(stub.get(), "with the shim's session open");
  printf("echo again %s\n", echo ? "ok" : "failed");
  ok = ok && echo;

  printf("ready\n");
  char c;
  while (read(0, &c, 1) > 0) {
  }
  if (p != 0 && cuMemFree_v2(p) != CUDA_SUCCESS) ok = false;
  echo = Echo(stub.get(), "after the free");
  ok = ok && echo;
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  printf("done %s\n", ok ? "ok" : "failed");
  return ok ? 0 : 1;
}

// KServe v2 over gRPC for `vit serve --grpc-port`: inference.GRPCInferenceService as KServe's
// grpc_predict_v2.proto defines it, with Triton's RepositoryIndex (apps/serve/proto), on gRPC's callback API
// (a call waiting for its batch holds no thread). It serves the HTTP side's models through the same queues,
// pixel and body budgets and metrics; only the wire differs.
#pragma once
#include <memory>
#include <string>

#include "budget.h"
#include "models.h"

namespace vit::app {

struct GrpcLimits {
  std::string host = "127.0.0.1";
  int port = 0;
  int max_message_mb = 32;  // one request message (--max-body-mb): RESOURCE_EXHAUSTED past it
  int timeout_s = 30;       // on shutdown, calls still running after this long are cancelled
};

class GrpcServer {
 public:
  // bodies: the HTTP side's --max-bodies-mb, which each request message holds until it is answered.
  GrpcServer(Service& service, Budget& bodies, const GrpcLimits& limits);
  ~GrpcServer();
  // Binds and starts serving; throws vit::Error naming the address when it cannot. Returns "address:port".
  std::string listen();
  // Stops taking calls; those under way are answered (cancelled after timeout_s). Returns at once.
  void stop();
  // Returns once stop() has finished every call.
  void wait();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit::app

// The calls of grpc_server.h: health, metadata and the repository index answered at once, ModelInfer handed
// to the HTTP side's infer (kserve.h) in its form and finished from the thread that answers it.
#include "grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <type_traits>

#include "grpc_infer.h"
#include <grpc_predict_v2.grpc.pb.h>  // generated from apps/serve/proto
#include "kserve.h"
#include "routes.h"
#include "vit/error.h"

namespace vit::app {

namespace {

using Clock = std::chrono::steady_clock;
namespace pb = inference;

// A model's version: "" (the server's choice) or "1", the one each model has.
void check_version(const ServedModel& m, const std::string& version) {
  if (!version.empty() && version != "1")
    throw HttpError(404, "model '" + m.name + "' has version 1 only, not '" + version + "'");
}

const char* code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    default: return "INTERNAL";
  }
}

class InferenceService final : public pb::GRPCInferenceService::CallbackService {
 public:
  // vit::app::Service: inside this class, Service names gRPC's base class.
  InferenceService(app::Service& service, Budget& bodies) : service_(service), bodies_(bodies) {
    Metrics& m = service_.metrics();
    m.counter("vit_grpc_requests_total", "KServe gRPC calls answered, by method, model and status code.");
    m.histogram("vit_grpc_request_duration_seconds", "Time from a gRPC call's message read to its answer, by method.",
                {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx, const pb::ServerLiveRequest*,
                                       pb::ServerLiveResponse* res) override {
    return now(ctx, "ServerLive", [&] { res->set_live(true); });
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx, const pb::ServerReadyRequest*,
                                        pb::ServerReadyResponse* res) override {
    return now(ctx, "ServerReady", [&] { res->set_ready(service_.ready()); });
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx, const pb::ModelReadyRequest* req,
                                       pb::ModelReadyResponse* res) override {
    return now(ctx, "ModelReady", [&] {
      const ServedModel& m = service_.model(req->name());
      check_version(m, req->version());
      res->set_ready(m.ready);
      return m.name;
    });
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                           pb::ServerMetadataResponse* res) override {
    return now(ctx, "ServerMetadata", [&] {
      res->set_name("vit");
      res->set_version(VIT_VERSION);
      res->add_extensions("model_repository");
    });
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx, const pb::ModelMetadataRequest* req,
                                          pb::ModelMetadataResponse* res) override {
    return now(ctx, "ModelMetadata", [&] { return metadata(*req, res); });
  }
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx, const pb::RepositoryIndexRequest* req,
                                            pb::RepositoryIndexResponse* res) override {
    return now(ctx, "RepositoryIndex", [&] {
      for (const auto& m : service_.models()) {
        if (req->ready() && !m->ready) continue;
        auto* e = res->add_models();
        e->set_name(m->name);
        e->set_version("1");
        e->set_state(m->ready ? "READY" : "UNAVAILABLE");
        e->set_reason(m->ready ? "" : "warming up");
      }
    });
  }
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx, const pb::RepositoryModelLoadRequest*,
                                                pb::RepositoryModelLoadResponse*) override {
    return now(ctx, "RepositoryModelLoad", [] { fixed(); });
  }
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* ctx, const pb::RepositoryModelUnloadRequest*,
                                                  pb::RepositoryModelUnloadResponse*) override {
    return now(ctx, "RepositoryModelUnload", [] { fixed(); });
  }
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx, const pb::ModelInferRequest* req,
                                       pb::ModelInferResponse* res) override;

 private:
  // Finishes a call with status, counting it under its method and model.
  void finish(grpc::ServerUnaryReactor* reactor, const char* method, const std::string& model, const grpc::Status& status,
              Clock::time_point started) {
    Labels labels{{"method", method}};
    if (!model.empty()) labels.push_back({"model", model});
    service_.metrics().observe("vit_grpc_request_duration_seconds", {{"method", method}},
                               std::chrono::duration<double>(Clock::now() - started).count());
    labels.push_back({"code", code_name(status.error_code())});
    service_.metrics().add("vit_grpc_requests_total", labels);
    reactor->Finish(status);
  }

  // A call answered on the spot by fill (which may return the model it was for); its errors as statuses.
  template <typename Fill>
  grpc::ServerUnaryReactor* now(grpc::CallbackServerContext* ctx, const char* method, Fill fill) {
    const Clock::time_point started = Clock::now();
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    std::string model;
    grpc::Status status;
    try {
      if constexpr (std::is_same_v<decltype(fill()), void>) fill();
      else model = fill();
    } catch (const HttpError& e) {
      status = grpc::Status(status_code(e.status()), e.what());
    }
    finish(reactor, method, model, status, started);
    return reactor;
  }

  std::string metadata(const pb::ModelMetadataRequest& req, pb::ModelMetadataResponse* res) {
    const ServedModel& m = service_.model(req.name());
    check_version(m, req.version());
    const nlohmann::json meta = model_metadata(m);
    res->set_name(m.name);
    res->add_versions("1");
    res->set_platform(meta["platform"].get<std::string>());
    for (const char* side : {"inputs", "outputs"})
      for (const auto& t : meta[side]) {
        auto* tm = side[0] == 'i' ? res->add_inputs() : res->add_outputs();
        tm->set_name(t["name"].get<std::string>());
        tm->set_datatype(t["datatype"].get<std::string>());
        for (const auto& d : t["shape"]) tm->add_shape(d.get<int64_t>());
      }
    return m.name;
  }

  // Load and unload: refused whatever they name (Triton's clients number these messages' fields unlike
  // KServe's proto, so the name is not read).
  [[noreturn]] static void fixed() {
    throw HttpError(400, "models are fixed at start (-m): the server neither loads nor unloads them");
  }

  app::Service& service_;
  Budget& bodies_;
};

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* ctx, const pb::ModelInferRequest* req,
                                                       pb::ModelInferResponse* res) {
  const Clock::time_point started = Clock::now();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // The message counts against --max-bodies-mb from here to its answer, as an HTTP body does.
  const int64_t held = int64_t(req->ByteSizeLong());
  if (held > bodies_.limit() || !bodies_.take(held)) {
    const HttpError e = busy("the server holds " + std::to_string(bodies_.used() >> 20) + " of at most " +
                             std::to_string(bodies_.limit() >> 20) + " MiB of request bodies (--max-bodies-mb)");
    finish(reactor, "ModelInfer", "", grpc::Status(grpc::StatusCode::UNAVAILABLE, e.what()), started);
    return reactor;
  }
  Reply reply([this, reactor, res, held, started](HttpResponse answer, const std::string& model) {
    const grpc::Status status = infer_response(answer, res);
    bodies_.give(held);
    finish(reactor, "ModelInfer", model, status, started);
  }, ErrorForm::Plain, [ctx] { return !ctx->IsCancelled(); });  // a call its client cancelled is dropped unrun
  try {
    HttpRequest http = infer_http_request(*req);
    check_version(service_.model(req->model_name()), req->model_version());
    kserve_infer(service_, req->model_name(), http, reply);
  } catch (const HttpError& e) {
    reply.fail(e);
  } catch (const nlohmann::json::exception& e) {
    reply.fail(HttpError(400, std::string("bad request: ") + e.what()));
  } catch (const Error& e) {
    reply.fail(HttpError(400, e.problem()));
  }
  return reactor;
}

}  // namespace

struct GrpcServer::Impl {
  Impl(Service& s, Budget& b, const GrpcLimits& l) : service(s, b), limits(l) {}
  InferenceService service;
  GrpcLimits limits;
  std::unique_ptr<grpc::Server> server;
  std::once_flag stopping;
  std::thread shutdown;
};

GrpcServer::GrpcServer(Service& service, Budget& bodies, const GrpcLimits& limits)
    : impl_(std::make_unique<Impl>(service, bodies, limits)) {}

GrpcServer::~GrpcServer() {
  stop();
  wait();
}

std::string GrpcServer::listen() {
  const std::string& host = impl_->limits.host;
  const std::string bracketed = host.find(':') != std::string::npos ? "[" + host + "]" : host;  // IPv6
  const std::string address = bracketed + ":" + std::to_string(impl_->limits.port);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(impl_->limits.max_message_mb << 20);
  // gRPC would share a port another process holds (SO_REUSEPORT): a busy port is an error, as HTTP's is.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&impl_->service);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port == 0) throw Error("cannot listen on " + address + " for gRPC (--grpc-port)");
  return bracketed + ":" + std::to_string(port);
}

void GrpcServer::stop() {
  if (!impl_->server) return;
  std::call_once(impl_->stopping, [this] {
    impl_->shutdown = std::thread([this] {
      impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(impl_->limits.timeout_s));
    });
  });
}

void GrpcServer::wait() {
  if (impl_->server) impl_->server->Wait();
  if (impl_->shutdown.joinable()) impl_->shutdown.join();
}

}  // namespace vit::app

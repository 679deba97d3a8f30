// KServe's v2 protocol (the Open Inference Protocol, REST) for `vit serve`: server and model metadata,
// health, and infer with encoded images (`image`, BYTES) or preprocessed ones (`pixel_values`, FP32), in
// JSON or with the binary tensor data extension, as Triton's clients send and read them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models.h"
#include "routes.h"

namespace vit::app {

// The /v2 routes, answering for the service's models.
void add_kserve_routes(Service& service, std::vector<Route>* routes);

// Infer for model `model` on a request read whole (POST /v2/models/{name}/infer's JSON header and binary
// tensor data): parsed, queued on the model's Batcher, answered through reply. KServe over gRPC
// (grpc_server.h) hands its calls over in this form, so both protocols share one parser and one queue.
void kserve_infer(Service& service, const std::string& model, HttpRequest& req, const Reply& reply);
// GET /v2/models/{name}: the model's inputs and outputs.
nlohmann::json model_metadata(const ServedModel& m);

}  // namespace vit::app

// KServe's v2 protocol (the Open Inference Protocol, REST) for `vit serve`: server and model metadata,
// health, and infer with encoded images (`image`, BYTES) or preprocessed ones (`pixel_values`, FP32), in
// JSON or with the binary tensor data extension, as Triton's clients send and read them.
#pragma once
#include <vector>

#include "models.h"
#include "routes.h"

namespace vit::app {

// The /v2 routes, answering for the service's models.
void add_kserve_routes(Service& service, std::vector<Route>* routes);

}  // namespace vit::app

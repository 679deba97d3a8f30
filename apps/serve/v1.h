// `vit serve`'s own endpoints: POST /v1/classify (an encoded image as the body, or several as a
// multipart form, answered as `vit classify --json` writes them) and GET /metrics.
#pragma once
#include <vector>

#include "models.h"
#include "routes.h"

namespace vit::app {

void add_v1_routes(Service& service, std::vector<Route>* routes);

}  // namespace vit::app

// `vit serve`'s own endpoints: POST /v1/classify (an encoded image as the body, or several as a
// multipart form, answered as `vit classify --json` writes them), POST /v1/explain (one image's attention
// picture, a PNG, as `vit explain` draws it), GET /metrics and the web page at GET /.
#pragma once
#include <vector>

#include "models.h"
#include "routes.h"

namespace vit::app {

void add_v1_routes(Service& service, std::vector<Route>* routes);

}  // namespace vit::app

// A KServe v2 gRPC ModelInfer call in the form the HTTP side's infer takes and answers (kserve.h): the
// request message as the JSON header and binary tensor data of POST /v2/models/{name}/infer, and that
// answer as the response message. Both protocols so share one parser, one set of checks and one writer of
// tensors, and give the same bytes.
#pragma once
#include <grpcpp/support/status.h>

#include <grpc_predict_v2.pb.h>  // generated from apps/serve/proto
#include "http.h"

namespace vit::app {

// The request as an infer body: every input's data as binary tensor data (raw_input_contents as they are,
// typed contents written as raw), every output asked for as binary. Throws HttpError 400 for contents
// that do not match their datatype or their inputs.
HttpRequest infer_http_request(const inference::ModelInferRequest& request);

// The answer as a response message (each output's bytes in raw_output_contents), or the error's status.
grpc::Status infer_response(const HttpResponse& answer, inference::ModelInferResponse* response);

// The gRPC status an HTTP error status stands for (400 INVALID_ARGUMENT, 404 NOT_FOUND, 413
// RESOURCE_EXHAUSTED, 503 UNAVAILABLE, ...).
grpc::StatusCode status_code(int http_status);

}  // namespace vit::app

// OpenAI's embeddings API for images and texts, as the official `openai` client calls it: POST /v1/embeddings
// (each input an image as a data URI or bare base64, or on a CLIP or SigLIP model with its text tower a text;
// floats or base64 little-endian f32 out) and GET /v1/models.
// Errors in OpenAI's form.
#pragma once
#include <string>
#include <vector>

#include "models.h"
#include "routes.h"

namespace vit::app {

void add_openai_routes(Service& service, std::vector<Route>* routes);

// Standard base64 (RFC 4648 section 4, padding optional) to bytes, whitespace anywhere ignored as RFC 2045's
// decoders ignore it; false for anything else.
bool base64_decode(const std::string& text, size_t from, std::string* out);
std::string base64_encode(const char* data, size_t size);

}  // namespace vit::app

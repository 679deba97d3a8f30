// The one error type the engine and models throw. Messages name the file or object, what is wrong,
// and where it helps, what was expected against what was found; apps/main.cpp is the only catch.
#pragma once
#include <stdexcept>
#include <string>

namespace vit {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace vit

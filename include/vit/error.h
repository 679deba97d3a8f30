// The error type the engine, models and library throw. A message names the file or object, what is
// wrong and, where it helps, what was expected against what was found. Caught in two places: where one
// input's failure must not end a batch (the Classifier, per image), and where a command ends
// (apps/main.cpp, which turns it into "error: ..." and the exit status of apps/common.h).
#pragma once
#include <stdexcept>
#include <string>

namespace vit {

struct Error : std::runtime_error {
  explicit Error(const std::string& message) : std::runtime_error(message), problem_(message) {}
  // An error about one file or object: what() is "subject: problem", problem() the part after it.
  Error(const std::string& subject, const std::string& problem)
      : std::runtime_error(subject + ": " + problem), problem_(problem) {}
  const std::string& problem() const { return problem_; }

 private:
  std::string problem_;
};

// An option's value that cannot be used (out of range, or not suiting the model): the caller's mistake,
// as the Python module's ValueError says.
struct ArgumentError : Error {
  using Error::Error;
};

// A call stopped early because its caller asked it to (a vit::BetweenBatches hook returned false).
struct Interrupted : Error {
  using Error::Error;
};

// Writing an output failed part way (a full disk, an I/O error): the run's results are incomplete.
struct WriteError : Error {
  using Error::Error;
};

}  // namespace vit

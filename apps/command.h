// What every vit subcommand is: a parse step that checks everything it can before any work, then the
// work, which returns one of the exit statuses below (the same for every subcommand; README's table).
#pragma once
#include <functional>

namespace vit::app {

// Exit status of every subcommand.
constexpr int kExitOk = 0;           // everything worked
constexpr int kExitSomeFailed = 1;   // some inputs failed; the others were done
constexpr int kExitUsage = 2;        // bad usage, an unusable model, or an output that cannot be created
constexpr int kExitWriteFailed = 3;  // writing an output failed part way (a full disk, an I/O error)
constexpr int kExitFailed = 4;       // the run itself failed (out of memory, an engine error)

// A parsed subcommand: checks what can be checked before any work (flags, model, outputs; a failure
// there is kExitUsage) and returns the work, which returns the exit status.
using Prepare = std::function<std::function<int()>()>;

}  // namespace vit::app

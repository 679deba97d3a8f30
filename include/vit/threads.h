// The threads the engine computes on: OpenMP's, which oneDNN runs on too. A header of its own, standard
// types only, so that the engine, the library and programs that set the count once share it.
#pragma once

namespace vit {

// Sets the calling thread's OpenMP thread count, with which forward passes and oneDNN's primitives run
// (0: leave it as it is); returns the count in force.
int set_threads(int n);

// A thread count to run with: `requested`, or the cores when it asks for more (a warning says so); 0
// stays 0 (all cores).
int usable_threads(int requested);

}  // namespace vit

#pragma once
#include <string>

namespace ignis::cli {

// Runs the ops available on `device` ("cpu", "cuda" or "all") against the CPU reference on
// random inputs, prints one line per check, and returns 0 when all pass.
int run_selfcheck(const std::string& device);

}  // namespace ignis::cli

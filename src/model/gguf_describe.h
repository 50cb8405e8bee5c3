#pragma once
// A human-readable summary of a GGUF model for `ignis info`.
#include <string>

#include "model/gguf.h"

namespace ignis::model {

// Several lines: format version and size, model name, architecture with every scalar
// `<arch>.*` hyperparameter, the vocabulary size, and the tensor count, parameter count and
// per-type totals.
std::string describe_gguf(const GgufFile& file);

}  // namespace ignis::model

#include "model/gguf_describe.h"

#include <cstdio>
#include <map>
#include <sstream>

namespace ignis::model {

namespace {

std::string megabytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

struct TypeTotal {
  std::uint64_t tensors = 0;
  std::uint64_t elements = 0;
  std::uint64_t bytes = 0;
};

}  // namespace

std::string describe_gguf(const GgufFile& file) {
  std::ostringstream out;
  out << "gguf v" << file.version() << ", " << megabytes(file.file_size()) << ", alignment " << file.alignment()
      << "\n";
  if (const GgufValue* name = file.find("general.name"); name != nullptr && name->type() == GgufType::STRING)
    out << "name: " << name->as<std::string>("general.name") << "\n";

  const GgufValue* arch = file.find("general.architecture");
  if (arch != nullptr && arch->type() == GgufType::STRING) {
    const std::string prefix = arch->as<std::string>("general.architecture") + ".";
    out << "architecture: " << prefix.substr(0, prefix.size() - 1) << "\n";
    for (const auto& [key, value] : file.metadata())
      if (key.starts_with(prefix) && value.type() != GgufType::ARRAY)
        out << "  " << key.substr(prefix.size()) << ": " << value.summary() << "\n";
  } else {
    out << "architecture: (general.architecture missing)\n";
  }
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens"); tokens != nullptr) {
    out << "vocabulary: " << tokens->array_size() << " tokens";
    if (const GgufValue* model = file.find("tokenizer.ggml.model"); model != nullptr)
      out << " (tokenizer " << model->summary() << ")";
    out << "\n";
  }

  std::map<std::string, TypeTotal> by_type;
  std::uint64_t parameters = 0;
  for (const GgufTensor& t : file.tensors()) {
    TypeTotal& total = by_type[ggml_type_name(t.type)];
    ++total.tensors;
    total.elements += t.n_elements;
    total.bytes += t.data.size();
    parameters += t.n_elements;
  }
  out << "tensors: " << file.tensors().size() << " (" << static_cast<double>(parameters) / 1e6 << "M parameters)\n";
  for (const auto& [type, total] : by_type)
    out << "  " << type << ": " << total.tensors << " tensors, " << total.elements << " elements, "
        << megabytes(total.bytes) << "\n";
  return out.str();
}

}  // namespace ignis::model

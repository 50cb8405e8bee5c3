// libFuzzer target: the GGUF reader on arbitrary bytes. Any outcome but a parse or an
// ignis::Error (a crash, a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ignis/error.h"
#include "model/gguf.h"
#include "model/gguf_describe.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ignis::model;
  try {
    const GgufFile file = GgufFile::parse(std::as_bytes(std::span(data, size)));
    (void)describe_gguf(file);
    for (const auto& [key, value] : file.metadata()) (void)value.summary();
    for (const GgufTensor& t : file.tensors())
      if (ggml_can_dequantize(t.type) && t.n_elements <= (1u << 20)) (void)dequantize(t);
  } catch (const ignis::Error&) {
  }
  return 0;
}

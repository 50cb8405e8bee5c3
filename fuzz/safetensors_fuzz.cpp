// libFuzzer target: the safetensors reader on arbitrary bytes. Any outcome but a parse or an
// ignis::Error (a crash, a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ignis/error.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ignis::model;
  try {
    const SafetensorsFile file = SafetensorsFile::parse(std::as_bytes(std::span(data, size)));
    for (const SafetensorsTensor& t : file.tensors())
      if (t.dtype != SafetensorsDType::F8_E4M3 && t.dtype != SafetensorsDType::F8_E5M2 && t.n_elements <= (1u << 20))
        (void)to_f32(t);
  } catch (const ignis::Error&) {
  }
  return 0;
}

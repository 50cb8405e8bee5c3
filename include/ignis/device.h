#pragma once
// Where a tensor's memory lives: the host, or CUDA device N. Also asks whether a GPU is usable.
#include <ostream>
#include <string>
#include <string_view>

namespace ignis {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return {Kind::cpu, 0}; }
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  bool operator==(const Device&) const = default;

  std::string str() const;
  // Parses "cpu", "cuda" or "cuda:N"; throws ignis::Error otherwise.
  static Device parse(std::string_view text);
};

inline std::ostream& operator<<(std::ostream& out, const Device& d) { return out << d.str(); }

// True when ignis was built with CUDA and at least one GPU answers.
bool cuda_available();
// Number of usable GPUs (0 without CUDA support or without a driver).
int cuda_device_count();
// "NVIDIA H100 80GB HBM3, sm_90, 132 SMs" or a line saying why no GPU is usable.
std::string cuda_device_summary();

}  // namespace ignis

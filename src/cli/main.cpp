// The `ignis` command line. Today: `info` (build, GPU, default model) and `selfcheck`
// (runs each available op implementation against the CPU reference on random data).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/selfcheck.h"
#include "ignis/device.h"
#include "ignis/error.h"

namespace {

int run_info(const std::string& model_path) {
  std::printf("ignis %s\n", IGNIS_VERSION);
  std::printf("cuda kernels: %s\n", IGNIS_WITH_CUDA ? "built" : "not built");
  std::printf("gpu: %s\n", ignis::cuda_device_summary().c_str());
  std::error_code ec;
  const auto size = std::filesystem::file_size(model_path, ec);
  if (ec)
    std::printf("model: %s (not found: run scripts/setup.sh)\n", model_path.c_str());
  else
    std::printf("model: %s (%.1f MB)\n", model_path.c_str(), static_cast<double>(size) / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ignis: attention kernels and an LLM inference engine"};
  app.require_subcommand(1);

  std::string model_path = IGNIS_DEFAULT_MODEL;
  auto* info = app.add_subcommand("info", "Show the build, the GPU and the default model");
  info->add_option("model", model_path, "Model file")->capture_default_str();

  std::string device_name = "all";
  auto* selfcheck = app.add_subcommand("selfcheck", "Check every available op against the CPU reference");
  selfcheck->add_option("--device", device_name, "cpu, cuda or all")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  try {
    if (info->parsed()) return run_info(model_path);
    if (selfcheck->parsed()) return ignis::cli::run_selfcheck(device_name);
  } catch (const ignis::Error& e) {
    std::fprintf(stderr, "ignis: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

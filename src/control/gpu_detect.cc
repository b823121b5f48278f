#include "gpu_detect.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include "control/backends/slurm/slurm_backend.h"

namespace edt::control {

std::vector<Gpu> detect_gpus() {
  std::vector<Gpu> gpus;
  if (access("/usr/bin/nvidia-smi", X_OK) != 0) return gpus;
  FILE* p = popen("/usr/bin/nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null", "r");
  if (!p) return gpus;
  std::array<char, 512> line;
  while (fgets(line.data(), line.size(), p)) {
    std::string text(line.data());
    auto comma = text.find(',');
    if (comma == std::string::npos) continue;
    std::string model = text.substr(comma + 1);
    while (!model.empty() && (model.front() == ' ')) model.erase(0, 1);
    while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
    for (auto& c : model)
      if (c == ' ') c = '-';
    gpus.push_back({std::atoi(text.c_str()), model, false, ""});
  }
  pclose(p);
  return gpus;
}

Result<std::vector<Gpu>> slurm_gpus(const std::string& partition) {
  EDT_ASSIGN_OR_RETURN(auto models, SlurmBackend::partition_gpus(partition));
  std::vector<Gpu> gpus;
  for (const auto& [model, count] : models)
    for (int i = 0; i < count; ++i) gpus.push_back({static_cast<int>(gpus.size()), model, false, ""});
  return gpus;
}

}  // namespace edt::control

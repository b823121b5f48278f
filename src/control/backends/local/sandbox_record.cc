#include "control/backends/local/sandbox_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/io.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

// In the container's directory, which no bind gives the container.
constexpr const char* kRecordFile = "/sandbox.json";

std::optional<SandboxRecord> read_record(const std::string& dir) {
  const int fd = ::open((dir + kRecordFile).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string text(4096, '\0');
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && st.st_size < 4096)
    n = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.value("cluster", nlohmann::json()).is_string() ||
      !j.value("container", nlohmann::json()).is_string() || !j.value("pid", nlohmann::json()).is_number_integer() ||
      !j.value("start_time", nlohmann::json()).is_number_unsigned())
    return std::nullopt;
  return SandboxRecord{j["cluster"], j["container"], {j["pid"].get<int64_t>(), j["start_time"].get<uint64_t>()}};
}

}  // namespace

Status write_record(const SandboxRecord& record, const std::string& dir) {
  const nlohmann::json j = {{"cluster", record.cluster},
                            {"container", record.container},
                            {"pid", record.ref.pid},
                            {"start_time", record.ref.start_time}};
  return io::replace_file(dir + kRecordFile, j.dump() + "\n", 0600);
}

std::vector<SandboxRecord> read_records(const std::string& containers_dir) {
  std::vector<SandboxRecord> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(containers_dir, ec))
    if (auto record = read_record(entry.path().string()); record && record->container == entry.path().filename())
      out.push_back(std::move(*record));
  return out;
}

std::optional<FoundSandbox> identify_sandbox(const SandboxRef& ref, const std::optional<std::string>& in_cgroup,
                                             const std::vector<SandboxRecord>& records) {
  if (in_cgroup) {
    // The kernel's word for the container; the record gives its cluster
    // and, once written, which of the cgroup's sandboxes is the current one.
    for (const auto& r : records)
      if (r.container == *in_cgroup)
        return r.ref.pid == 0 || r.ref == ref ? std::optional<FoundSandbox>({r.cluster, r.container, ref})
                                              : std::nullopt;
    return std::nullopt;
  }
  const SandboxRecord* match = nullptr;
  for (const auto& r : records) {
    if (r.ref.pid == 0 || r.ref != ref) continue;
    if (match) return std::nullopt;  // two records of one process: trust neither
    match = &r;
  }
  if (!match) return std::nullopt;
  return FoundSandbox{match->cluster, match->container, ref};
}

}  // namespace edt::control

#include "launcher/output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "common/io.h"

namespace edt::launcher {
namespace {

// Output that cannot be written (a closed terminal) is dropped: it must not
// stop the job.
void write_all(int fd, std::string_view bytes) { (void)io::write_all(fd, bytes, "worker output"); }

class DirectoryOutput final : public OutputSink {
 public:
  ~DirectoryOutput() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  void write(int rank, Stream stream, std::string_view bytes) override { write_all(fd(rank, stream), bytes); }
  void close(int, Stream) override {}

  std::vector<int> fds_;  // rank * 2 + stream

 private:
  int fd(int rank, Stream stream) const { return fds_[rank * 2 + (stream == Stream::kStderr ? 1 : 0)]; }
};

}  // namespace

void LinePrefixer::emit_line(int rank, Stream stream, std::string_view text) {
  std::string line = "[" + std::to_string(rank) + (stream == Stream::kStdout ? "]<stdout>: " : "]<stderr>: ");
  line.append(text);
  line.push_back('\n');
  emit_(stream, line);
}

void LinePrefixer::write(int rank, Stream stream, std::string_view bytes) {
  std::string& pending = pending_[{rank, stream}];
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    size_t take = std::min(newline == std::string_view::npos ? bytes.size() : newline, kMaxLine - pending.size());
    pending.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    bool line_ended = !bytes.empty() && bytes.front() == '\n';
    if (line_ended) bytes.remove_prefix(1);
    if (line_ended || pending.size() >= kMaxLine) {
      emit_line(rank, stream, pending);
      pending.clear();
    }
  }
}

void LinePrefixer::close(int rank, Stream stream) {
  auto it = pending_.find({rank, stream});
  if (it == pending_.end()) return;
  if (!it->second.empty()) emit_line(rank, stream, it->second);
  pending_.erase(it);
}

std::unique_ptr<OutputSink> terminal_output() {
  return std::make_unique<LinePrefixer>(
      [](Stream stream, std::string_view line) { write_all(stream == Stream::kStdout ? 1 : 2, line); });
}

Result<std::unique_ptr<OutputSink>> directory_output(const std::string& dir, int np) {
  auto output = std::make_unique<DirectoryOutput>();
  for (int rank = 0; rank < np; ++rank) {
    std::filesystem::path rank_dir = std::filesystem::path(dir) / ("rank." + std::to_string(rank));
    std::error_code ec;
    std::filesystem::create_directories(rank_dir, ec);
    if (ec) {
      return io_error("cannot make " + rank_dir.string() + " for --output-filename (give a writable directory)", ec.value());
    }
    for (const char* name : {"stdout", "stderr"}) {
      std::string path = (rank_dir / name).string();
      int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return io_error("cannot write " + path + " for --output-filename", errno);
      output->fds_.push_back(fd);
    }
  }
  return std::unique_ptr<OutputSink>(std::move(output));
}

}  // namespace edt::launcher

#include "launcher/output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
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
  explicit DirectoryOutput(std::string dir) : dir_(std::move(dir)) {}
  ~DirectoryOutput() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  void write(int rank, Stream stream, std::string_view bytes) override {
    while (fds_.size() <= static_cast<size_t>(rank) * 2 + 1) (void)open_next();
    write_all(fds_[rank * 2 + (stream == Stream::kStderr ? 1 : 0)], bytes);
  }
  void close(int, Stream) override {}

  // DIR/rank.N for the next N; its fds are -1 if it cannot be made.
  Status open_next() {
    const std::filesystem::path rank_dir = std::filesystem::path(dir_) / ("rank." + std::to_string(fds_.size() / 2));
    std::error_code ec;
    std::filesystem::create_directories(rank_dir, ec);
    Status status = Status::ok();
    for (const char* name : {"stdout", "stderr"}) {
      const std::string path = (rank_dir / name).string();
      const int fd = ec ? -1 : open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0 && status.is_ok())
        status = ec ? io_error("cannot make " + rank_dir.string() + " for --output-filename (give a writable directory)",
                               ec.value())
                    : io_error("cannot write " + path + " for --output-filename", errno);
      fds_.push_back(fd);
    }
    return status;
  }

 private:
  std::string dir_;
  std::vector<int> fds_;  // rank * 2 + stream
};

// The time as horovodrun prefixes it (Python's time.asctime()).
std::string asctime_now() {
  const time_t now = time(nullptr);
  struct tm local;
  localtime_r(&now, &local);
  char text[64];
  strftime(text, sizeof text, "%a %b %e %H:%M:%S %Y", &local);
  return text;
}

}  // namespace

void LinePrefixer::emit_line(int rank, Stream stream, std::string_view text) {
  std::string line = (timestamp_ ? asctime_now() : "") + "[" + std::to_string(rank) + (stream == Stream::kStdout ? "]<stdout>: " : "]<stderr>: ");
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

std::unique_ptr<OutputSink> terminal_output(bool timestamp) {
  return std::make_unique<LinePrefixer>(
      [](Stream stream, std::string_view line) { write_all(stream == Stream::kStdout ? 1 : 2, line); }, timestamp);
}

Result<std::unique_ptr<OutputSink>> directory_output(const std::string& dir, int np) {
  auto output = std::make_unique<DirectoryOutput>(dir);
  for (int rank = 0; rank < np; ++rank) EDT_RETURN_IF_ERROR(output->open_next());
  return std::unique_ptr<OutputSink>(std::move(output));
}

}  // namespace edt::launcher

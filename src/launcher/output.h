// Where the workers' output goes.
//
// By default every line a worker writes appears on edtrun's stdout or stderr
// as "[rank]<stdout>: line" or "[rank]<stderr>: line" (horovodrun's format).
// Lines are whole: output arrives in arbitrary chunks, so each stream keeps
// its unfinished line until the newline (or the end of the stream, or
// kMaxLine bytes) arrives, and lines of different workers never mix.
// With -prefix-timestamp the prefix starts with the time, as horovodrun
// writes it ("Mon Jan 20 12:34:56 2025[0]<stdout>:line").
// With --output-filename DIR each worker's streams are copied unchanged to
// DIR/rank.N/stdout and DIR/rank.N/stderr instead.
//
// Used from the driver's event loop only; not thread safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <poll.h>

#include <utility>
#include <vector>

#include "edt/status.h"
#include "launcher/process.h"

namespace edt::launcher {

enum class Stream { kStdout, kStderr };

// Adds a pollfd for each open output pipe of `owner`'s process, and to
// `owners` which owner and stream it is, in the same order: the drivers'
// poll loops read what arrives through these.
template <typename Owner>
void watch_output(Owner* owner, const Process& process, std::vector<pollfd>* fds,
                  std::vector<std::pair<Owner*, Stream>>* owners) {
  for (auto [fd, stream] : {std::pair{process.stdout_fd(), Stream::kStdout}, {process.stderr_fd(), Stream::kStderr}}) {
    if (fd < 0) continue;
    fds->push_back({fd, POLLIN, 0});
    owners->emplace_back(owner, stream);
  }
}

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // Bytes the worker of `rank` wrote.
  virtual void write(int rank, Stream stream, std::string_view bytes) = 0;
  // The stream ended; an unfinished last line is emitted.
  virtual void close(int rank, Stream stream) = 0;
};

// The prefixing sink, emitting each finished line (with its prefix and
// newline) through `emit`.
class LinePrefixer final : public OutputSink {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;
  using Emit = std::function<void(Stream, std::string_view line)>;

  explicit LinePrefixer(Emit emit, bool timestamp = false) : emit_(std::move(emit)), timestamp_(timestamp) {}
  void write(int rank, Stream stream, std::string_view bytes) override;
  void close(int rank, Stream stream) override;

 private:
  void emit_line(int rank, Stream stream, std::string_view text);

  Emit emit_;
  bool timestamp_;
  std::map<std::pair<int, Stream>, std::string> pending_;
};

// Lines to edtrun's own stdout and stderr.
std::unique_ptr<OutputSink> terminal_output(bool timestamp = false);

// DIR/rank.N/stdout and stderr for ranks 0..np-1, made (and truncated) now;
// those of a higher rank (an elastic job's later workers) when it first
// writes (output it cannot write is dropped).
Result<std::unique_ptr<OutputSink>> directory_output(const std::string& dir, int np);

}  // namespace edt::launcher

#include "control/api/static_files.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace edt::control {

namespace fs = std::filesystem;

namespace {

std::string content_type(const fs::path& file) {
  static const std::map<std::string, std::string> kTypes = {
      {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},   {".json", "application/json"},
      {".svg", "image/svg+xml"},             {".png", "image/png"},
      {".ico", "image/x-icon"},              {".map", "application/json"},
      {".woff2", "font/woff2"},              {".txt", "text/plain; charset=utf-8"},
  };
  auto it = kTypes.find(file.extension().string());
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

// Whether each segment of `path` names an ordinary entry (not "", ".",
// "..", hidden, or holding a NUL).
bool plain_segments(const std::string& path) {
  std::istringstream segments(path);
  std::string segment;
  std::getline(segments, segment, '/');  // before the leading '/'
  while (std::getline(segments, segment, '/')) {
    if (segment.empty()) continue;
    if (segment.front() == '.' || segment.find('\0') != std::string::npos) return false;
  }
  return true;
}

}  // namespace

std::optional<Reply> static_file(const std::string& dir, const std::string& path) {
  if (dir.empty() || path.empty() || path.front() != '/' || !plain_segments(path)) return std::nullopt;
  fs::path file = fs::path(dir) / path.substr(1);
  std::error_code ec;
  if (fs::is_directory(file, ec)) file /= "index.html";
  const fs::path root = fs::weakly_canonical(dir, ec);
  const fs::path real = fs::weakly_canonical(file, ec);
  if (ec || !fs::is_regular_file(real, ec) || real.string().rfind(root.string() + "/", 0) != 0) return std::nullopt;
  std::ifstream in(real, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream body;
  body << in.rdbuf();
  return Reply{200, body.str(), content_type(real), {}, {}, {}};
}

}  // namespace edt::control

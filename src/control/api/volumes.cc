// Handlers: /api/v1/volumes.
#include <unistd.h>

#include <cctype>
#include <memory>

#include "control/api/handlers.h"

namespace edt::control::handlers {

using nlohmann::json;

Answer list_volumes(ApiContext& ctx, const Request&, const User& user) {
  json items = json::array();
  for (const auto& v : ctx.service->volumes(user)) items.push_back(volume_to_json(v));
  return json_reply(200, {{"volumes", items}});
}

Answer create_volume(ApiContext& ctx, const Request& req, const User& user) {
  auto request = read_body(req, parse_volume_request);
  if (!request.is_ok()) return request.status();
  return json_answer(201, ctx.service->create_volume(user, *request), volume_to_json);
}

Answer delete_volume(ApiContext& ctx, const Request& req, const User& user) {
  auto volume = ctx.service->delete_volume(user, req.matches[1]);
  if (!volume.is_ok()) return volume.status();
  return json_reply(200, {{"deleted", volume->name}});
}

namespace {

constexpr size_t kMaxListed = 10000;  // entries in one listing; more are left out (truncated)

// The one ?path= of a files route (`required`, else it may be absent: ""),
// refusing any other parameter.
Result<std::string> path_param(const Request& req, bool required, const std::string& fix) {
  for (const auto& [key, value] : req.params)
    if (key != "path") return malformed(key, "the query parameter '" + key + "' is not read here", fix);
  const size_t given = req.params.count("path");
  if (given > 1 || (required && given == 0))
    return malformed("path", "the query parameter 'path' is missing or given more than once", fix);
  return given ? req.get_param_value("path") : std::string();
}

// attachment; filename*=UTF-8''NAME, the path's last segment percent-encoded,
// so no quote or newline in a file's name reaches the header.
std::string attachment(const std::string& path) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "attachment; filename*=UTF-8''";
  for (unsigned char c : path.substr(path.rfind('/') + 1)) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_') out += static_cast<char>(c);
    else out += {'%', kHex[c >> 4], kHex[c & 15]};
  }
  return out;
}

json entry_to_json(const VolumeEntry& e) {
  return {{"name", e.name}, {"type", e.type}, {"bytes", e.bytes}, {"modified", e.modified}};
}

}  // namespace

Answer upload_volume_file(ApiContext& ctx, const Request& req, const User& user) {
  auto path = path_param(req, true, "name the file with ?path=, e.g. PUT /api/v1/volumes/data/files?path=dir/train.csv");
  if (!path.is_ok()) return path.status();
  auto file = ctx.service->upload_file(user, req.matches[1], *path, req.body);
  if (!file.is_ok()) return file.status();
  return json_reply(200, {{"volume", file->volume}, {"path", file->path}, {"bytes", file->bytes}});
}

Answer list_volume_files(ApiContext& ctx, const Request& req, const User& user) {
  auto path = path_param(req, false, "name a directory with ?path=, e.g. ?path=data; without it, the volume's top");
  if (!path.is_ok()) return path.status();
  auto listing = ctx.service->volume_files(user, req.matches[1], *path, kMaxListed);
  if (!listing.is_ok()) return listing.status();
  json entries = json::array();
  for (const auto& e : listing->entries) entries.push_back(entry_to_json(e));
  return json_reply(200, {{"volume", req.matches[1]}, {"path", *path}, {"entries", entries},
                          {"truncated", listing->truncated}});
}

Answer download_volume_file(ApiContext& ctx, const Request& req, const User& user) {
  auto path = path_param(req, true, "name the file with ?path=, e.g. ?path=data/train.csv");
  if (!path.is_ok()) return path.status();
  auto opened = ctx.service->open_volume_file(user, req.matches[1], *path);
  if (!opened.is_ok()) return opened.status();
  Reply reply;
  reply.content_type = "application/octet-stream";
  reply.headers.emplace_back("Content-Disposition", attachment(*path));
  auto fd = std::make_shared<FileDescriptor>(std::move(opened->fd));
  reply.stream = [fd](StreamWriter& out) {
    char buffer[65536];
    for (ssize_t n; (n = ::read(fd->get(), buffer, sizeof(buffer))) > 0;)
      if (!out.write(std::string_view(buffer, static_cast<size_t>(n)))) return;
  };
  return reply;
}

Answer delete_volume_file(ApiContext& ctx, const Request& req, const User& user) {
  auto path = path_param(req, true, "name the file or directory with ?path=, e.g. ?path=data/old.csv");
  if (!path.is_ok()) return path.status();
  auto removed = ctx.service->delete_volume_file(user, req.matches[1], *path);
  if (!removed.is_ok()) return removed.status();
  return json_reply(200, {{"deleted", *path}, {"entries", *removed}});
}

}  // namespace edt::control::handlers

#include "control/model/image_user.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <optional>
#include <sstream>

#include "control/model/error.h"

namespace edt::control {

namespace {

// The ':'-separated fields of each line of a passwd or group file that has
// at least `min_fields` (comments and short lines are skipped, as glibc does).
std::vector<std::vector<std::string>> entries(const std::string& table, size_t min_fields) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = passwd_fields(line);
    if (f.size() >= min_fields) out.push_back(std::move(f));
  }
  return out;
}


Status refuse(std::string_view user, const std::string& why, const std::string& fix) {
  return invalid("", "the image's User '" + std::string(user) + "': " + why, fix);
}

constexpr const char* kFixImage = "build the image with a User its /etc/passwd and /etc/group name, then import or pull it again";

// The uid of `text` (a name or a number) in passwd's `users`, and its entry.
Result<ContainerUser> find_user(std::string_view user, std::string_view text,
                                const std::vector<std::vector<std::string>>& users) {
  const std::optional<uint32_t> uid = parse_id(text);
  for (const auto& f : users) {
    if (uid ? parse_id(f[2]) != uid : f[0] != text) continue;
    auto id = parse_id(f[2]);
    auto gid = parse_id(f[3]);
    if (!id || !gid) return refuse(user, "its /etc/passwd entry '" + f[0] + "' has no numeric uid and gid", kFixImage);
    return ContainerUser{f[0], *id, *gid, {}, f[5], f[6], true};
  }
  if (!uid) return refuse(user, "no user '" + std::string(text) + "' in the image's /etc/passwd", kFixImage);
  return ContainerUser{*uid == 0 ? "root" : "u" + std::to_string(*uid), *uid, 0, {}, "", "", false};
}

// The gid of `text` (a name or a number) in group's `groups`.
Result<uint32_t> find_group(std::string_view user, std::string_view text,
                            const std::vector<std::vector<std::string>>& groups) {
  if (auto gid = parse_id(text)) return *gid;
  for (const auto& f : groups)
    if (f[0] == text)
      if (auto gid = parse_id(f[2])) return *gid;
  return refuse(user, "no group '" + std::string(text) + "' in the image's /etc/group", kFixImage);
}

// The gids of the groups whose member list (the fourth field) names `name`.
std::vector<uint32_t> member_of(const std::string& name, uint32_t gid,
                                const std::vector<std::vector<std::string>>& groups) {
  std::vector<uint32_t> out;
  for (const auto& f : groups) {
    std::istringstream members(f[3]);
    std::string member;
    auto id = parse_id(f[2]);
    while (id && *id != gid && std::getline(members, member, ','))
      if (member == name && std::find(out.begin(), out.end(), *id) == out.end()) out.push_back(*id);
  }
  return out;
}

}  // namespace

Result<ContainerUser> resolve_image_user(std::string_view user, const std::string& passwd, const std::string& group) {
  if (user.empty()) return ContainerUser{};
  const size_t colon = user.find(':');
  const std::string_view who = user.substr(0, colon);
  if (who.empty() || (colon != std::string_view::npos && colon + 1 == user.size()) ||
      user.find(':', colon == std::string_view::npos ? user.size() : colon + 1) != std::string_view::npos)
    return refuse(user, "it is not one of user, uid, user:group or uid:gid",
                  "write it as the OCI image spec's config.User says");
  const auto groups = entries(group, 4);
  EDT_ASSIGN_OR_RETURN(ContainerUser found, find_user(user, who, entries(passwd, 7)));
  if (colon != std::string_view::npos) {
    EDT_ASSIGN_OR_RETURN(found.gid, find_group(user, user.substr(colon + 1), groups));
  }
  if (!valid_login_name(found.name))
    return refuse(user, "its /etc/passwd name '" + found.name + "' is not a name a login may have (letters, digits, "
                  "'_', '.', '-'; not first '-', '.' or a digit; at most 32)", kFixImage);
  if (found.uid >= kContainerIds || found.gid >= kContainerIds)
    return refuse(user, "uid " + std::to_string(found.uid) + " and gid " + std::to_string(found.gid) +
                            " must both be below " + std::to_string(kContainerIds) + ", the ids a container maps",
                  "give the image a user with smaller ids");
  if (found.in_passwd) found.groups = member_of(found.name, found.gid, groups);
  found.home = found.root() ? "/root" : login_home(found.name, found.home);
  return found;
}

std::vector<std::string> passwd_fields(const std::string& line) {
  std::vector<std::string> f;
  for (size_t at = 0, next; at <= line.size(); at = next + 1) {
    next = std::min(line.find(':', at), line.size());
    f.push_back(line.substr(at, next - at));
  }
  return f;
}

std::optional<uint32_t> parse_id(std::string_view text) {
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool valid_login_name(std::string_view name) {
  auto allowed = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; };
  return !name.empty() && name.size() <= 32 && !std::isdigit(static_cast<unsigned char>(name[0])) &&
         name[0] != '-' && name[0] != '.' && std::all_of(name.begin(), name.end(), allowed);
}

std::string login_home(const std::string& name, const std::string& home) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(home).lexically_normal();
  static const char* kKept[] = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "root",
                                "run", "sbin", "sys", "usr", "job"};
  const std::string top = path.has_relative_path() ? (*std::next(path.begin())).string() : "";
  const bool kept = std::find(std::begin(kKept), std::end(kKept), top) != std::end(kKept);
  if (!path.is_absolute() || top.empty() || kept || path.string() != home) return "/home/" + name;
  return home;
}

std::string passwd_with(const std::string& passwd, const ContainerUser& user, const std::string& shell) {
  std::string out;
  std::istringstream lines(passwd);
  std::string line;
  const std::string gecos = user.in_passwd ? "" : "edt";
  while (std::getline(lines, line)) {
    const auto f = passwd_fields(line);
    const bool comment = !line.empty() && line[0] == '#';
    if (f[0] == user.name || (!comment && f.size() >= 3 && parse_id(f[2]) == user.uid)) continue;
    out += line + "\n";
  }
  return out + user.name + ":x:" + std::to_string(user.uid) + ":" + std::to_string(user.gid) + ":" + gecos + ":" +
         user.home + ":" + shell + "\n";
}

}  // namespace edt::control

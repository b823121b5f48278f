// The user a container's sessions, jobs and notebooks run as: its image's
// `User` (the OCI config's field: "name", "uid", "name:group", "uid:gid"
// and the mixed forms), resolved against the image's /etc/passwd and
// /etc/group as runc and Docker resolve it (docs/images.md, "User"). Pure
// functions of their arguments; any thread may call them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"

namespace edt::control {

// The ids a container maps (0..65535 of its owner's subordinate range):
// a User beyond them has no id on the host.
inline constexpr uint32_t kContainerIds = 65536;

struct ContainerUser {
  std::string name = "root";
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary: the /etc/group entries that list it, but gid
  std::string home = "/root";    // where its writable home is (login_home())
  std::string shell;             // as /etc/passwd says; "" when it has no entry
  bool in_passwd = true;         // false: a numeric User the image's /etc/passwd lacks
  bool root() const { return uid == 0; }
  bool operator==(const ContainerUser&) const = default;
};

// The ':'-separated fields of one line of a passwd or group file ("" gives
// one empty field).
std::vector<std::string> passwd_fields(const std::string& line);

// A decimal id (uid, gid) as the whole of `text`; nullopt for anything else.
std::optional<uint32_t> parse_id(std::string_view text);

// Whether `name` may be a login's name: 1 to 32 of letters, digits, '_',
// '.', '-', not starting with '-', '.' or a digit (useradd's rule). The name
// goes into ssh's `user@host` argument and /etc/passwd: an image's name
// such as "-oProxyCommand=..." must never reach them.
bool valid_login_name(std::string_view name);

// `user` (an image's User; "" is root) resolved in `passwd` and `group`
// (the image's files' text). A name that is not there, a malformed field,
// a name valid_login_name() refuses or an id past kContainerIds is an
// error naming the User and what to do.
// A uid the image's passwd lacks is user "u<uid>", group 0 unless given,
// as Docker runs it. `home` is login_home()'s.
Result<ContainerUser> resolve_image_user(std::string_view user, const std::string& passwd, const std::string& group);

// Where a user whose /etc/passwd entry says `home` gets its writable home:
// there, unless that is not a place of its own (relative, "/", or in what
// the container keeps for itself: /etc, /usr, /proc, /root...), then
// /home/<name>.
std::string login_home(const std::string& name, const std::string& home);

// `passwd` with `user`'s entry (its name or uid) replaced by one at its
// home with `shell`, or added where it had none.
std::string passwd_with(const std::string& passwd, const ContainerUser& user, const std::string& shell);

}  // namespace edt::control

#include "control/backends/local/tool_bundle.h"

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "common/io.h"
#include "control/backends/local/container_fs.h"
#include "control/backends/local/host_command.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrograms[] = {"/usr/sbin/sshd", "/usr/bin/ssh"};

// What the bundle holds: each library by the name the program asks for,
// and the loader.
struct Needed {
  std::map<std::string, std::string> libraries;  // name -> host path
  std::string loader;                            // host path
};

// ldd's lines: "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)", and
// the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)".
void add_ldd_output(const std::string& text, Needed& needed) {
  std::istringstream lines(text);
  std::string name, arrow, path;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    if (!(words >> name)) continue;
    if (name.starts_with("/") && name.find("/ld-linux") != std::string::npos) needed.loader = name;
    else if (words >> arrow >> path && arrow == "=>" && path.starts_with("/")) needed.libraries[name] = path;
  }
}

Status copy(const std::string& from, const std::string& to, fs::perms mode) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);  // a link's target, under the link's name
  if (!ec) fs::permissions(to, mode, ec);
  if (ec) return Status(StatusCode::kIoError, "copy " + from + " to " + to + ": " + ec.message());
  return Status::ok();
}

Status fill(const std::string& dir, const Needed& needed) {
  for (const char* sub : {"/lib", "/libexec", "/bin"}) EDT_RETURN_IF_ERROR(make_dirs(dir + sub, 0755));
  constexpr auto kFile = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read;
  constexpr auto kProgram = kFile | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  for (const auto& [name, path] : needed.libraries) EDT_RETURN_IF_ERROR(copy(path, dir + "/lib/" + name, kFile));
  const std::string loader = fs::path(needed.loader).filename();
  EDT_RETURN_IF_ERROR(copy(needed.loader, dir + "/lib/" + loader, kProgram));
  for (const char* program : kPrograms)
    EDT_RETURN_IF_ERROR(copy(program, dir + "/libexec/" + fs::path(program).filename().string(), kProgram));
  const std::string at(kToolsInContainer);
  ::chmod(dir.c_str(), 0755);  // whatever the umask: the containers' root passes through it
  return io::write_file(dir + "/bin/ssh",
                        "#!/bin/sh\n# edt's ssh (tool_bundle.h), for an image without its own.\nexec " + at + "/lib/" +
                            loader + " --library-path " + at + "/lib " + at + "/libexec/ssh \"$@\"\n",
                        0755);
}

}  // namespace

Result<ToolBundle> make_tool_bundle(const std::string& data_dir) {
  Needed needed;
  std::string listing;
  for (const char* program : kPrograms) {
    EDT_ASSIGN_OR_RETURN(const std::string ldd, run_host_command({"/usr/bin/ldd", program}, "libc-bin"));
    add_ldd_output(ldd, needed);
    struct stat st {};
    if (::stat(program, &st) != 0) return io_error(std::string("stat ") + program, errno);
    listing += std::string(program) + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtime) + "\n";
  }
  // What ldd found, without its load addresses (which differ every run).
  for (const auto& [name, path] : needed.libraries) listing += name + " " + path + "\n";
  listing += needed.loader;
  if (needed.loader.empty()) return Status(StatusCode::kIoError, "ldd named no dynamic loader for /usr/sbin/sshd");
  EDT_RETURN_IF_ERROR(make_dirs(data_dir + "/tools", 0755));
  EDT_ASSIGN_OR_RETURN(std::string dir,
                       made_once(data_dir + "/tools", listing, [&](const std::string& tmp) { return fill(tmp, needed); }));
  return ToolBundle{std::move(dir), fs::path(needed.loader).filename()};
}

std::vector<std::string> bundled_argv(const ToolBundle& bundle, const std::string& program) {
  const std::string at(kToolsInContainer);
  return {at + "/lib/" + bundle.loader, "--library-path", at + "/lib", at + "/libexec/" + program};
}

}  // namespace edt::control

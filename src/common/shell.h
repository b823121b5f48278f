// A word for sh: what every piece of edt that writes a shell command (a
// remote worker's script, a job's cd, Jupyter's start script, a login
// profile, a Slurm batch script, the CLI's echo of a command) quotes with.
#pragma once

#include <string>
#include <string_view>

namespace edt {

// `text` in single quotes, each ' inside written '\'' : sh reads it back
// as exactly `text`, whatever it holds.
inline std::string shell_quote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string_view("'\\''") : std::string_view(&c, 1);
  return quoted + "'";
}

}  // namespace edt

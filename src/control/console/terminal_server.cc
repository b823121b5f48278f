#include "control/console/terminal_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "common/io.h"
#include "common/process.h"
#include "control/console/random_hex.h"
#include "control/console/websocket.h"

namespace edt::control {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr size_t kMaxMessageBytes = 1 << 20;
constexpr int kPollMs = 500;
// Connections served at once (each a thread: a handshake of at most 10 s,
// then a terminal); more are answered 503 and closed.
constexpr int kMaxConnections = 256;

// Writes all of data to the browser's socket, a pty or a key file.
bool write_all(int fd, std::string_view data) { return io::write_all(fd, data, "terminal").is_ok(); }

void refuse(int fd, const std::string& status, const std::string& message) {
  write_all(fd, "HTTP/1.1 " + status + "\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
                    std::to_string(message.size() + 1) + "\r\n\r\n" + message + "\n");
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The value of a header in a raw request head, or "".
std::string header_value(const std::string& head, const std::string& name) {
  const std::string low = lower(head);
  const std::string key = "\r\n" + lower(name) + ":";
  size_t at = low.find(key);
  if (at == std::string::npos) return "";
  size_t start = at + key.size();
  size_t end = head.find("\r\n", start);
  std::string value = head.substr(start, end - start);
  value.erase(0, value.find_first_not_of(" \t"));
  value.erase(value.find_last_not_of(" \t") + 1);
  return value;
}

// Reads the request head (up to the blank line) within 10 s.
std::optional<std::string> read_head(int fd) {
  std::string head;
  char buffer[1024];
  for (int waited = 0; waited < 10000; waited += kPollMs) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return std::nullopt;
    head.append(buffer, static_cast<size_t>(n));
    if (head.find("\r\n\r\n") != std::string::npos) return head;
    if (head.size() > kMaxRequestBytes) return std::nullopt;
  }
  return std::nullopt;
}

// Applies a control message {"type":"resize","cols":C,"rows":R} to the pty;
// anything else is ignored.
void resize(int master, const std::string& text) {
  auto control = nlohmann::json::parse(text, nullptr, false);
  if (!control.is_object() || control["type"] != "resize" || !control["cols"].is_number_integer() ||
      !control["rows"].is_number_integer())
    return;
  winsize size{static_cast<unsigned short>(std::clamp(control["rows"].get<int>(), 1, 1000)),
               static_cast<unsigned short>(std::clamp(control["cols"].get<int>(), 1, 1000)), 0, 0};
  ::ioctl(master, TIOCSWINSZ, &size);
}

// Ends ssh: SIGHUP (what closing a terminal sends), then SIGKILL after 2 s.
void end_child(pid_t child) {
  ::kill(child, SIGHUP);
  for (int i = 0; i < 40; ++i) {
    if (::waitpid(child, nullptr, WNOHANG) == child) return;
    ::usleep(50000);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

// The ssh command for a session: to the container on its address, with the
// session's key, checking the host key against the cluster's known_hosts.
// `files` is the session's path prefix: <files>.key and <files>.known_hosts.
std::vector<std::string> ssh_argv(const TerminalTarget& target, const std::string& files) {
  return {"ssh", "-tt", "-i", files + ".key", "-p", std::to_string(target.ssh_port),
          "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
          "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + files + ".known_hosts",
          "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
          "-o", "ServerAliveInterval=30", "-o", "HostKeyAlias=" + target.container,
          // "--": the destination is never read as an option, whatever the user's name.
          "--", target.user + "@" + target.address};
}

// The child side of forkpty: runs `argv` (made before the fork: only
// async-signal-safe calls here) on the pty. Never returns.
[[noreturn]] void exec_ssh(char* const argv[]) {
  proc::unblock_signals();
  static char term[] = "TERM=xterm-256color";
  ::putenv(term);
  ::execvp(argv[0], argv);
  // stderr is the pty here: the browser's terminal shows why.
  static constexpr char kMessage[] = "edtd: cannot run ssh (is the OpenSSH client installed?)\r\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(127);
}

// Writes `content` to a new file `path` (0600); false if it cannot.
bool write_new_file(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool written = write_all(fd, content);
  ::close(fd);
  return written;
}

}  // namespace

TerminalServer::TerminalServer(std::string key_dir) : key_dir_(std::move(key_dir)) {}

TerminalServer::~TerminalServer() { stop(); }

Status TerminalServer::start(const std::string& host, int port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return io_error("terminal server: socket", errno);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    return invalid_argument("terminal server: '" + host + "' is not an IPv4 address");
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 16) != 0) {
    Status st = io_error("terminal server: listen on " + host + ":" + std::to_string(port), errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return st;
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { accept_loop(); });
  return Status::ok();
}

void TerminalServer::stop() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  // Connections notice stopping_ within one poll period.
  while (active_.load() > 0) ::usleep(50000);
}

std::string TerminalServer::open_session(TerminalTarget target, std::vector<std::string> origins) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(pending_, [now](const auto& item) { return item.second.expires < now; });
  std::string id = random_hex(16);
  for (auto& o : origins) o = lower(std::move(o));
  pending_[id] = {std::move(target), std::move(origins), now + kSessionTtl};
  return id;
}

std::optional<TerminalTarget> TerminalServer::take_session(const std::string& id, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return std::nullopt;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  if (pending.expires < std::chrono::steady_clock::now()) return std::nullopt;
  const auto& allowed = pending.origins;
  if (!origin.empty() && std::find(allowed.begin(), allowed.end(), lower(origin)) == allowed.end()) return std::nullopt;
  return std::move(pending.target);
}

void TerminalServer::accept_loop() {
  while (!stopping_) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    if (active_.load() >= kMaxConnections) {
      refuse(fd, "503 Service Unavailable",
             "edtd serves " + std::to_string(kMaxConnections) + " terminal connections at once; close one or retry");
      ::close(fd);
      continue;
    }
    active_++;
    std::thread([this, fd] {
      serve(fd);
      ::close(fd);
      active_--;
    }).detach();
  }
}

void TerminalServer::serve(int fd) {
  auto head = read_head(fd);
  if (!head) return refuse(fd, "400 Bad Request", "expected a WebSocket upgrade request");
  const size_t line_end = head->find("\r\n");
  const std::string line = head->substr(0, line_end);
  const std::string prefix = "GET /terminal/";
  if (line.compare(0, prefix.size(), prefix) != 0)
    return refuse(fd, "404 Not Found", "terminals are at /terminal/<session>; open one from the console");
  std::string id = line.substr(prefix.size(), line.find(' ', prefix.size()) - prefix.size());
  id = id.substr(0, id.find('?'));
  const std::string key = header_value(*head, "Sec-WebSocket-Key");
  if (lower(header_value(*head, "Upgrade")) != "websocket" || key.empty())
    return refuse(fd, "400 Bad Request", "expected a WebSocket upgrade (Upgrade: websocket, Sec-WebSocket-Key)");
  auto target = take_session(id, header_value(*head, "Origin"));
  if (!target)
    return refuse(fd, "403 Forbidden",
                  "this terminal session is unknown, used or expired, or was opened from another origin than this "
                  "page's; open the terminal again from the console");

  // The key and known_hosts live in files only while the session does: ssh
  // reads them from there.
  const std::string files = key_dir_ + "/" + id;
  auto remove_files = [&files] {
    ::unlink((files + ".key").c_str());
    ::unlink((files + ".known_hosts").c_str());
  };
  if (!write_new_file(files + ".key", target->private_key) ||
      !write_new_file(files + ".known_hosts", target->known_hosts)) {
    remove_files();
    return refuse(fd, "500 Internal Server Error", "could not write the session's key files under " + key_dir_);
  }

  write_all(fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
                    websocket::accept_key(key) + "\r\n\r\n");
  // Frames the browser sent right after the request are already in `head`.
  run_terminal(fd, head->substr(head->find("\r\n\r\n") + 4), *target, files);
  remove_files();
}

std::string TerminalServer::pump(int fd, int master, websocket::Reader& reader) {
  std::string close_frame = websocket::close_payload(1000, "session ended");
  char buffer[65536];
  bool open = true;
  while (open && !stopping_) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {master, POLLIN, 0}};
    if (::poll(fds, 2, kPollMs) < 0 && errno != EINTR) break;
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::read(master, buffer, sizeof buffer);
      if (n <= 0) break;  // ssh ended: EIO on the master
      if (!write_all(fd, websocket::encode_frame(websocket::Opcode::kBinary, std::string_view(buffer, static_cast<size_t>(n))))) {
        return "";
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return "";
      reader.feed(std::string_view(buffer, static_cast<size_t>(n)));
    }
    while (open) {
      auto next = reader.next();
      if (!next.is_ok()) return websocket::close_payload(1002, next.status().message());
      if (!*next) break;
      websocket::Message& m = **next;
      if (m.opcode == websocket::Opcode::kBinary) {
        write_all(master, m.payload);
      } else if (m.opcode == websocket::Opcode::kText) {
        resize(master, m.payload);
      } else if (m.opcode == websocket::Opcode::kPing) {
        write_all(fd, websocket::encode_frame(websocket::Opcode::kPong, m.payload));
      } else if (m.opcode == websocket::Opcode::kClose) {
        close_frame = websocket::close_payload(1000, "");
        open = false;
      }
    }
  }
  return close_frame;
}

void TerminalServer::run_terminal(int fd, const std::string& early_bytes, const TerminalTarget& target,
                                  const std::string& files) {
  std::vector<std::string> argv = ssh_argv(target, files);
  const std::vector<char*> args = proc::c_strings(argv);  // before the fork
  int master = -1;
  winsize size{24, 80, 0, 0};
  pid_t child = ::forkpty(&master, nullptr, nullptr, &size);
  if (child < 0) {
    write_all(fd, websocket::encode_frame(websocket::Opcode::kClose, websocket::close_payload(1011, "could not open a pty")));
    return;
  }
  if (child == 0) exec_ssh(args.data());
  websocket::Reader reader(kMaxMessageBytes);
  reader.feed(early_bytes);
  std::string close_frame = pump(fd, master, reader);
  if (!close_frame.empty()) write_all(fd, websocket::encode_frame(websocket::Opcode::kClose, close_frame));
  end_child(child);
  ::close(master);
}

}  // namespace edt::control

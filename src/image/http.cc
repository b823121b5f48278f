#include "image/http.h"

#include <curl/curl.h>

#include <cctype>
#include <mutex>

namespace edt::image {
namespace {

constexpr size_t kMaxErrorBody = 64 << 10;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// What one transfer gathers: the headers of the answer now arriving, and
// its body, to the sink or kept.
struct Transfer {
  CURL* curl = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse response;
  Status sink_status;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response.headers.clear();  // a new answer: a redirect's, then the last one's
  } else if (auto colon = line.find(':'); colon != std::string::npos) {
    t->response.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 300 && code < 400) return bytes;  // a redirect's body
  if (code >= 200 && code < 300 && t->request->sink) {
    t->sink_status = t->request->sink(data, bytes);
    return t->sink_status.is_ok() ? bytes : 0;
  }
  const uint64_t bound = code >= 200 && code < 300 ? t->request->max_kept : kMaxErrorBody;
  if (t->response.body.size() + bytes > bound) {
    if (code < 200 || code >= 300) return bytes;  // an error's text: the first bytes do
    t->sink_status = Status(StatusCode::kResourceExhausted, "the answer is over " + std::to_string(bound) + " bytes");
    return 0;
  }
  t->response.body.append(data, bytes);
  return bytes;
}

struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

}  // namespace

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

struct HttpClient::State {
  HttpOptions options;
  CURL* curl = nullptr;
  ~State() {
    if (curl) curl_easy_cleanup(curl);
  }
};

HttpClient::HttpClient(HttpOptions options) : state_(std::make_unique<State>()) {
  global_init();
  state_->options = std::move(options);
  state_->curl = curl_easy_init();
}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

Result<HttpResponse> HttpClient::get(const HttpRequest& request) {
  CURL* c = state_->curl;
  if (!c) return internal_error("libcurl: no handle");
  curl_easy_reset(c);
  Transfer t;
  t.curl = c;
  t.request = &request;
  curl_slist* raw = nullptr;
  for (const auto& h : request.headers) raw = curl_slist_append(raw, h.c_str());
  std::unique_ptr<curl_slist, SlistFree> headers(raw);
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, state_->options.connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, state_->options.stall_timeout_s);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!state_->options.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, state_->options.ca_file.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  const CURLcode rc = curl_easy_perform(c);
  if (!t.sink_status.is_ok()) return t.sink_status;
  if (rc != CURLE_OK) {
    return unavailable(std::string(error[0] ? error : curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.response.status);
  return std::move(t.response);
}

std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += std::string{kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += std::string{kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

std::string url_escape(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace edt::image

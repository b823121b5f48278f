// Client: the edt CLI's view of edtd's REST API. Where and who come from
// EDT_API and EDT_TOKEN, else from the file `edt login` writes
// (~/.config/edt/config.json). Every call returns the parsed JSON body or an
// ApiFailure holding the status and edtd's error (field, message, fix).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace httplib {
class Client;
}

namespace edt::cli {

struct ApiFailure {
  int status = 0;  // 0: edtd could not be reached
  std::string field;
  std::string message;
  std::string fix;
  // "refused (422): containers: containers is 1, fewer than 2\n  fix: ..."
  std::string to_string() const;
};

struct Endpoint {
  std::string api = "http://127.0.0.1:7470";
  std::string token;
};

// EDT_API / EDT_TOKEN, else the login file, else the defaults.
Endpoint load_endpoint();
std::string config_path();

class Client {
 public:
  explicit Client(Endpoint endpoint);
  ~Client();

  // Calls METHOD /api/v1<path>; the body (if any) is JSON.
  std::optional<ApiFailure> call(const std::string& method, const std::string& path, const nlohmann::json* body,
                                 nlohmann::json* out);
  // PUTs `bytes` as they are (application/octet-stream); the answer is JSON.
  std::optional<ApiFailure> put_bytes(const std::string& path, const std::string& bytes, nlohmann::json* out);
  // A text route (e.g. the hostfile).
  std::optional<ApiFailure> get_text(const std::string& path, std::string* out);
  // Streams a text route to `sink` as it arrives.
  std::optional<ApiFailure> stream(const std::string& path, const std::function<void(const char*, size_t)>& sink);

 private:
  Endpoint endpoint_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace edt::cli

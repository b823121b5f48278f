// The bodies of the API's requests other than a cluster spec (cluster.h),
// read into typed structs through Fields (fields.h), as a cluster spec is:
// unknown fields and wrong types are refused alike everywhere. Reading
// checks shape and format only (types, names, absolute paths); what depends
// on state (who asks, what exists on the host) is the service's. Never
// throws: a wrong body is a refusal (a Status) naming the field.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "control/model/catalog.h"
#include "control/model/error.h"

namespace edt::control {

// POST /volumes: {"name", "host_path"?}. host_path is the admin's way to
// register a directory that exists on the host; without it edtd makes one.
struct VolumeRequest {
  std::string name;
  bool has_host_path = false;
  std::string host_path;  // as sent; "" if it was not a string
};
Status parse_volume_request(const nlohmann::json& body, VolumeRequest* out);

// POST /images: {"name", "root"? (default "/"), "frameworks": [...]}.
Status parse_image_request(const nlohmann::json& body, Image* out);
// POST /images/import: {"name", "path", "frameworks"?}.
Status parse_image_import_request(const nlohmann::json& body, ImageImport* out);
// POST /images/pull: {"reference", "name"?, "username"?, "password"?, "frameworks"?}.
Status parse_image_pull_request(const nlohmann::json& body, ImagePull* out);

// POST /users: {"name"}.
Status parse_user_request(const nlohmann::json& body, std::string* name);

// POST /users/{name}/tokens: {"expires_in"?, "description"?} (an empty
// body is read as {}). expires_in is whole seconds as a number, or a whole
// number with a unit of the contract's TokenLifetime ("90d", "12h"); without
// it the token never expires.
struct TokenRequest {
  std::optional<std::chrono::seconds> expires_in;
  std::string description;
};
Status parse_token_request(const nlohmann::json& body, TokenRequest* out);

// POST /clusters/{name}/jobs: {"command", "container"? (default: the
// launcher), "cwd"? (a container path, check_container_path; default: where
// the cluster mounts its first volume, Service::start_job)}.
struct JobRequest {
  std::string command;
  std::optional<std::string> container;
  std::optional<std::string> cwd;
};
Status parse_job_request(const nlohmann::json& body, JobRequest* out);

}  // namespace edt::control

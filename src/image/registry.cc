#include "image/registry.h"

#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "image/http.h"
#include "image/import.h"

namespace edt::image {
namespace {

using json = nlohmann::json;

const char* const kRefFix = "write it as REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:HEX "
                            "(e.g. nvcr.io/nvidia/pytorch:24.05-py3)";
const char* const kManifestAccept =
    "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

Status bad_reference(const std::string& why) {
  return Status(StatusCode::kInvalidArgument, "reference", "the image reference " + why, kRefFix);
}

bool is_registry_name(const std::string& first) {
  return first.find_first_of(".:") != std::string::npos || first == "localhost";
}

// Docker's grammar, loosely: lowercase letters, digits and separators in a
// repository; a tag of [A-Za-z0-9_.-], at most 128.
bool valid_repository(const std::string& repo) {
  if (repo.empty() || repo.size() > 255 || repo.front() == '/' || repo.back() == '/') return false;
  if (repo.find("//") != std::string::npos) return false;
  for (unsigned char c : repo)
    if (!(std::islower(c) || std::isdigit(c) || c == '.' || c == '_' || c == '-' || c == '/')) return false;
  return true;
}

bool valid_tag(const std::string& tag) {
  if (tag.empty() || tag.size() > 128) return false;
  for (unsigned char c : tag)
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '-')) return false;
  return tag[0] != '.' && tag[0] != '-';
}

bool valid_host(const std::string& host) {
  if (host.empty() || host.size() > 255) return false;
  for (unsigned char c : host)
    if (!(std::isalnum(c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']')) return false;
  return true;
}

}  // namespace

Result<Reference> parse_reference(const std::string& text) {
  // Nothing of `text` goes into these errors: a reference with user:pass@ in it must not echo.
  if (text.empty() || text.size() > 512) return bad_reference("is empty or over 512 characters");
  Reference ref;
  std::string rest = text;
  if (auto at = rest.find('@'); at != std::string::npos) {
    auto d = parse_digest(rest.substr(at + 1), "reference");
    if (!d.is_ok()) return bad_reference("has an '@' not followed by sha256:<64 hex digits>");
    ref.digest = *d;
    rest = rest.substr(0, at);
  }
  const auto slash = rest.find('/');
  if (slash != std::string::npos && is_registry_name(rest.substr(0, slash))) {
    ref.registry = rest.substr(0, slash);
    rest = rest.substr(slash + 1);
  } else {
    ref.registry = "docker.io";
  }
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    ref.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (!valid_tag(ref.tag)) return bad_reference("has a tag that is not 1 to 128 of [A-Za-z0-9_.-]");
  }
  if (ref.registry == "docker.io" && rest.find('/') == std::string::npos) rest = "library/" + rest;
  ref.repository = rest;
  if (!valid_host(ref.registry)) return bad_reference("names a registry that is no host[:port]");
  if (!valid_repository(ref.repository))
    return bad_reference("has a repository that is not lowercase letters, digits and . _ - /");
  if (ref.tag.empty() && !ref.digest) ref.tag = "latest";
  return ref;
}

std::string Reference::str() const {
  std::string out = registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (digest) out += "@" + digest->str();
  return out;
}

namespace {

struct Challenge {
  std::string scheme;  // lowercase: "bearer", "basic"
  std::map<std::string, std::string> params;
};

// `Bearer realm="https://auth",service="registry",scope="..."`.
Challenge parse_challenge(const std::string& header) {
  Challenge c;
  size_t i = header.find(' ');
  for (char ch : header.substr(0, i)) c.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  while (i != std::string::npos && i < header.size()) {
    while (i < header.size() && (header[i] == ' ' || header[i] == ',')) ++i;
    const size_t eq = header.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = header.substr(i, eq - i), value;
    i = eq + 1;
    if (i < header.size() && header[i] == '"') {
      const size_t end = header.find('"', i + 1);
      value = header.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
      i = end == std::string::npos ? end : end + 1;
    } else {
      const size_t end = header.find(',', i);
      value = header.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end;
    }
    for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    c.params[key] = value;
  }
  return c;
}

std::string text_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// The registry's own words from an error answer ({"errors": [{"code", "message"}]}), bounded.
std::string registry_words(const HttpResponse& r) {
  std::string out;
  json doc = json::parse(r.body, nullptr, false);
  if (doc.is_object() && doc.contains("errors") && doc["errors"].is_array()) {
    for (const json& e : doc["errors"]) {
      if (!e.is_object()) continue;
      out += (out.empty() ? "" : "; ") + text_at(e, "code") + " " + text_at(e, "message");
    }
  }
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  return out.empty() ? "" : " (" + out + ")";
}

}  // namespace

namespace {

// One server a pull asks: the registry, or its mirror. It learns the
// authentication the server wants from its first 401, and keeps the header.
class Endpoint {
 public:
  Endpoint(std::string base, std::string label, std::string repository, const RegistryCredentials* credentials,
           const HttpOptions& http)
      : base_(std::move(base)), label_(std::move(label)), repo_(std::move(repository)), creds_(credentials),
        http_(http) {}

  const std::string& label() const { return label_; }

  // GET base + path, authenticating once on a 401 (a token that expired).
  Result<HttpResponse> get(const std::string& path, HttpRequest request) {
    // Probed once: a mirror that is down is not waited for again, blob by blob.
    if (!probed_) probe_status_ = probe();
    probed_ = true;
    EDT_RETURN_IF_ERROR(probe_status_);
    request.url = base_ + path;
    auto response = send(request);
    if (!response.is_ok() || response->status != 401) return response;
    EDT_RETURN_IF_ERROR(authenticate(response->header("www-authenticate")));
    response = send(request);
    if (response.is_ok() && (response->status == 401 || response->status == 403)) return refused(*response);
    return response;
  }

 private:
  // GET /v2/: whether the server speaks the distribution API, and which
  // authentication it wants; the credentials are tried here, first.
  Status probe() {
    HttpRequest request;
    request.url = base_ + "/v2/";
    request.max_kept = 64 << 10;
    EDT_ASSIGN_OR_RETURN(HttpResponse r, send(request));
    if (r.status == 401) {
      EDT_RETURN_IF_ERROR(authenticate(r.header("www-authenticate")));
      EDT_ASSIGN_OR_RETURN(r, send(request));
      if (r.status == 401 || r.status == 403) return refused(r);
    }
    if (r.status != 200)
      return unavailable(label_ + " does not answer as an OCI registry (" + std::to_string(r.status) + " to /v2/)");
    return Status::ok();
  }

  Result<HttpResponse> send(const HttpRequest& request) {
    HttpRequest r = request;
    if (!auth_.empty()) r.headers.push_back(auth_);
    auto response = http_.get(r);
    if (!response.is_ok() && response.status().code() == StatusCode::kUnavailable)
      return unavailable(label_ + ": " + response.status().message());
    return response;
  }

  Status refused(const HttpResponse& r) const {
    const std::string who = creds_ && !creds_->empty() ? "the credentials of user '" + creds_->username + "'"
                                                       : "an anonymous pull";
    return Status(StatusCode::kUnauthenticated, label_ + " refused " + who + " for " + repo_ + " (" +
                                                    std::to_string(r.status) + ")" + registry_words(r));
  }

  std::string basic() const { return "Authorization: Basic " + base64(creds_->username + ":" + creds_->password); }
  bool has_credentials() const { return creds_ && !creds_->empty(); }

  Status authenticate(const std::string& header) {
    const Challenge c = parse_challenge(header);
    if (c.scheme == "basic") {
      if (!has_credentials())
        return Status(StatusCode::kUnauthenticated, label_ + " asks for credentials (Basic) to pull " + repo_);
      auth_ = basic();
      return Status::ok();
    }
    if (c.scheme != "bearer") {
      return Status(StatusCode::kUnauthenticated, label_ + " asks for an authentication edt does not speak ('" +
                                                      c.scheme + "'); edt speaks Bearer and Basic");
    }
    return fetch_token(c);
  }

  // The Bearer flow: a token from the realm for repository:REPO:pull.
  Status fetch_token(const Challenge& c) {
    auto realm = c.params.find("realm");
    if (realm == c.params.end() || realm->second.empty())
      return Status(StatusCode::kUnauthenticated, label_ + " asks for a Bearer token but names no realm");
    const bool https = realm->second.rfind("https://", 0) == 0;
    if (!https && !(realm->second.rfind("http://", 0) == 0 && base_.rfind("http://", 0) == 0))
      return Status(StatusCode::kUnauthenticated, label_ + "'s token realm is not https: " + realm->second);
    std::string url = realm->second + (realm->second.find('?') == std::string::npos ? "?" : "&");
    if (auto s = c.params.find("service"); s != c.params.end()) url += "service=" + url_escape(s->second) + "&";
    url += "scope=" + url_escape("repository:" + repo_ + ":pull");
    HttpRequest request;
    request.url = url;
    request.max_kept = 1 << 20;
    if (has_credentials()) request.headers.push_back(basic());
    auto response = http_.get(request);
    if (!response.is_ok()) return unavailable(label_ + "'s token service: " + response.status().message());
    if (response->status == 401 || response->status == 403) return refused(*response);
    json doc = json::parse(response->body, nullptr, false);
    std::string token = doc.is_object() ? text_at(doc, "token") : "";
    if (token.empty() && doc.is_object()) token = text_at(doc, "access_token");
    if (response->status != 200 || token.empty())
      return unavailable(label_ + "'s token service answered " + std::to_string(response->status) + " with no token");
    auth_ = "Authorization: Bearer " + token;
    return Status::ok();
  }

  std::string base_, label_, repo_;
  const RegistryCredentials* creds_;  // null: anonymous (a mirror)
  HttpClient http_;
  std::string auth_;  // the Authorization header, once learnt
  bool probed_ = false;
  Status probe_status_;
};

bool is_document_type(const std::string& media_type) {
  return media_type.find("manifest") != std::string::npos || media_type.find("index") != std::string::npos;
}

Status answer_error(const Endpoint& e, const HttpResponse& r, const std::string& what) {
  if (r.status == 404) return Status(StatusCode::kNotFound, e.label() + " has no " + what + registry_words(r));
  return unavailable(e.label() + " answered " + std::to_string(r.status) + " for " + what + registry_words(r));
}

}  // namespace

namespace {

// The blobs of one repository, from its endpoints in order (the mirror, then
// the registry): the first that gives a blob whole and true wins.
class RegistrySource : public BlobSource {
 public:
  RegistrySource(std::vector<std::unique_ptr<Endpoint>> endpoints, std::string repository, PullStats* stats,
                 ImportProgress* progress)
      : endpoints_(std::move(endpoints)), repo_(std::move(repository)), stats_(stats), progress_(progress) {}

  Status fetch(Store& store, const Store::Lock& lock, const Descriptor& d, const std::string& what) override {
    if (store.has_blob(d.digest)) {
      if (!fetched_.count(d.digest)) ++stats_->reused_blobs;
      return Status::ok();
    }
    declared_ += d.size;
    if (declared_ > store.limits().max_image_bytes) {
      return Status(StatusCode::kResourceExhausted, what + ": the image's blobs declare more than the image bound of " +
                                                        std::to_string(store.limits().max_image_bytes) + " bytes");
    }
    Status last;
    for (auto& e : endpoints_) {
      last = fetch_from(*e, store, lock, d, what);
      if (last.is_ok() || last.code() == StatusCode::kIoError || last.code() == StatusCode::kInternal) return last;
    }
    return last;
  }

  // The top manifest, by tag or digest, stored; its descriptor.
  Result<Descriptor> fetch_top(Store& store, const Store::Lock& lock, const Reference& ref) {
    Status last;
    for (auto& e : endpoints_) {
      auto d = top_from(*e, store, lock, ref);
      if (d.is_ok() || d.status().code() == StatusCode::kIoError) return d;
      last = d.status();
    }
    return last;
  }

 private:
  Status fetch_from(Endpoint& e, Store& store, const Store::Lock& lock, const Descriptor& d, const std::string& what) {
    const bool document = is_document_type(d.media_type) || what == "manifest";
    EDT_ASSIGN_OR_RETURN(Store::BlobWriter w, store.begin_blob(lock, d.digest, d.size, what + " " + d.digest.str()));
    uint64_t bytes = 0;
    HttpRequest request;
    if (document) request.headers.push_back(kManifestAccept);
    request.sink = [&](const char* data, size_t size) {
      bytes += size;
      if (progress_) progress_->bytes_streaming += size;
      return w.write(data, size);
    };
    const std::string path = "/v2/" + repo_ + (document ? "/manifests/" : "/blobs/") + d.digest.str();
    EDT_ASSIGN_OR_RETURN(HttpResponse r, e.get(path, request));
    if (r.status != 200) return answer_error(e, r, what + " " + d.digest.str());
    EDT_RETURN_IF_ERROR(w.commit().status().with_context(e.label()));
    fetched_.insert(d.digest);
    ++stats_->fetched_blobs;
    stats_->fetched_bytes += bytes;
    return Status::ok();
  }

  Result<Descriptor> top_from(Endpoint& e, Store& store, const Store::Lock& lock, const Reference& ref) {
    HttpRequest request;
    request.headers.push_back(kManifestAccept);
    request.max_kept = store.limits().max_document_bytes;
    const std::string what = "manifest " + ref.repository + (ref.digest ? "@" + ref.digest->str() : ":" + ref.tag);
    auto r = e.get("/v2/" + repo_ + "/manifests/" + (ref.digest ? ref.digest->str() : ref.tag), request);
    if (!r.is_ok()) return r.status().with_context(what);
    if (r->status != 200) return answer_error(e, *r, what);
    const Digest digest = sha256_of(r->body);
    if (ref.digest && digest != *ref.digest)
      return invalid_argument(e.label() + ": " + what + " hashes to " + digest.str());
    if (auto said = r->header("docker-content-digest"); !said.empty() && !ref.digest && said != digest.str())
      return invalid_argument(e.label() + ": " + what + " hashes to " + digest.str() + ", not the " + said + " it names");
    if (!store.has_blob(digest)) {
      EDT_RETURN_IF_ERROR(store.put_blob(lock, r->body, digest, what).status());
      ++stats_->fetched_blobs;
      stats_->fetched_bytes += r->body.size();
    }
    fetched_.insert(digest);
    Descriptor d;
    d.digest = digest;
    d.size = r->body.size();
    d.media_type = r->header("content-type");
    if (auto semi = d.media_type.find(';'); semi != std::string::npos) d.media_type.resize(semi);
    return d;
  }

  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::string repo_;
  PullStats* stats_;
  ImportProgress* progress_;
  std::set<Digest> fetched_;  // this pull's: not counted as reused
  uint64_t declared_ = 0;
};

std::string registry_base(const std::string& registry) {
  return "https://" + std::string(registry == "docker.io" ? "registry-1.docker.io" : registry);
}

}  // namespace

Result<ImageRecord> pull_image(Store& store, const Store::Lock& lock, const Reference& ref,
                               const PullOptions& options, PullStats* stats) {
  PullStats local;
  if (!stats) stats = &local;
  HttpOptions http;
  http.ca_file = options.registry.ca_file;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  if (auto m = options.registry.mirrors.find(ref.registry); m != options.registry.mirrors.end()) {
    endpoints.push_back(std::make_unique<Endpoint>(m->second, "mirror " + m->second, ref.repository, nullptr, http));
  }
  endpoints.push_back(std::make_unique<Endpoint>(registry_base(ref.registry), "registry " + ref.registry,
                                                 ref.repository, &options.credentials, http));
  RegistrySource source(std::move(endpoints), ref.repository, stats, options.progress);
  EDT_ASSIGN_OR_RETURN(Descriptor top, source.fetch_top(store, lock, ref));
  return import_from_index(store, lock, source, {top}, ImportOptions{options.name, options.progress});
}

}  // namespace edt::image

// edt volume create|list|delete|upload, edt job list|delete, edt image list|import|pull|pulls|rm, edt gpu list.
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/pull_progress.h"
#include "edt_api/contract.h"

namespace edt::cli {
namespace {

using nlohmann::json;

struct VolumeOptions {
  std::string name, host_path, local_file, as;
};

int create_volume(const VolumeOptions& o) {
  namespace request = api::fields::VolumeRequest;
  json body = {{key(request::name), o.name}};
  if (!o.host_path.empty()) body[key(request::host_path)] = o.host_path;
  Client client(load_endpoint());
  json out;
  if (auto f = client.call("POST", "/volumes", &body, &out)) return fail(*f);
  printf("volume %s created at %s\n", o.name.c_str(), out[key(api::fields::Volume::host_path)].get<std::string>().c_str());
  return 0;
}

int delete_volume(const VolumeOptions& o) {
  Client client(load_endpoint());
  if (auto f = client.call("DELETE", "/volumes/" + o.name, nullptr, nullptr)) return fail(*f);
  printf("volume %s deleted\n", o.name.c_str());
  return 0;
}

// Sends a local file to PUT /volumes/NAME/files?path=..., named --as or by its own name.
int upload_file(const VolumeOptions& o) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.local_file, ec))
    return usage_error(o.local_file + " is not a readable file", "give the path of a file to upload");
  if (std::filesystem::file_size(o.local_file, ec) > api::limits::VolumeFileUpload::maximum_bytes)
    return usage_error(o.local_file + " is over " + std::to_string(api::limits::VolumeFileUpload::maximum_bytes) +
                           " bytes, the most edtd takes in one upload",
                       "split it, or copy it in through a container (edt ssh)");
  std::ifstream in(o.local_file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) return usage_error("cannot read " + o.local_file, "check that you may read it");
  const std::string as = o.as.empty() ? std::filesystem::path(o.local_file).filename().string() : o.as;
  Client client(load_endpoint());
  json out;
  if (auto f = client.put_bytes("/volumes/" + o.name + "/files?path=" + query_value(as), bytes.str(), &out))
    return fail(*f);
  printf("uploaded %s to volume %s as %s (%lld bytes)\n", o.local_file.c_str(), o.name.c_str(), as.c_str(),
         static_cast<long long>(out[key(api::fields::VolumeFile::bytes)].get<int64_t>()));
  return 0;
}

// GETs `path` and returns the list under `field`, or a failure's exit code.
int get_list(const std::string& path, std::string_view field, json* list) {
  Client client(load_endpoint());
  json out;
  if (auto f = client.call("GET", path, nullptr, &out)) return fail(*f);
  *list = out[key(field)];
  return 0;
}

int list_volumes(const std::string& output) {
  namespace volume = api::fields::Volume;
  json volumes;
  if (int code = get_list("/volumes", api::fields::VolumeList::volumes, &volumes)) return code;
  if (print_json_if_asked(output, volumes)) return 0;
  std::vector<std::vector<std::string>> rows = {{"NAME", "OWNER", "HOST PATH"}};
  for (const auto& v : volumes) rows.push_back({v[key(volume::name)], v[key(volume::owner)], v[key(volume::host_path)]});
  print_table(rows);
  return 0;
}

int list_images(const std::string& output) {
  namespace image = api::fields::Image;
  json images;
  if (int code = get_list("/images", api::fields::ImageList::images, &images)) return code;
  if (print_json_if_asked(output, images)) return 0;
  std::vector<std::vector<std::string>> rows = {{"NAME", "FRAMEWORKS", "SIZE", "SOURCE"}};
  for (const auto& i : images) {
    std::string frameworks;
    for (const auto& f : i[key(image::frameworks)]) frameworks += (frameworks.empty() ? "" : ",") + f.get<std::string>();
    // An imported image shows where it came from; a root, the root.
    const std::string source = i[key(image::source)];
    const uint64_t bytes = i[key(image::size_bytes)];
    rows.push_back({i[key(image::name)], frameworks, bytes ? std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB" : "-",
                    source.empty() ? "root " + i[key(image::root)].get<std::string>() : source});
  }
  print_table(rows);
  return 0;
}

struct ImageOptions {
  std::string source, name;
  std::vector<std::string> frameworks;
};

// "pytorch-24.05.tar.gz" -> "pytorch-24-05": the file's name as an image name.
std::string image_name_of(const std::string& path) {
  std::string base = std::filesystem::path(path).lexically_normal().filename().string();
  if (base.empty()) base = std::filesystem::path(path).lexically_normal().parent_path().filename().string();
  for (const char* ext : {".tar.gz", ".tar.zst", ".tgz", ".tar"})
    if (base.size() > strlen(ext) && base.ends_with(ext)) base.resize(base.size() - strlen(ext));
  std::string name;
  for (char c : base) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  return name;
}

// edtd reads the source itself, from its own host: the path goes absolute.
int import_image(const ImageOptions& o) {
  namespace request = api::fields::ImageImportRequest;
  std::error_code ec;
  const std::string path = std::filesystem::absolute(o.source, ec).lexically_normal().string();
  if (ec || !std::filesystem::exists(path, ec))
    return usage_error(o.source + " does not exist", "give an OCI layout (a directory or a tar) or a docker save archive");
  json body = {{key(request::name), o.name.empty() ? image_name_of(path) : o.name}, {key(request::path), path}};
  if (!o.frameworks.empty()) body[key(request::frameworks)] = o.frameworks;
  Client client(load_endpoint());
  json out;
  if (auto f = client.call("POST", "/images/import", &body, &out)) return fail(*f);
  printf("image %s imported (%s, %llu MiB unpacked)\n", out[key(api::fields::Image::name)].get<std::string>().c_str(),
         out[key(api::fields::Image::digest)].get<std::string>().c_str(),
         static_cast<unsigned long long>(out[key(api::fields::Image::size_bytes)].get<uint64_t>() >> 20));
  return 0;
}

struct PullOptions {
  std::string reference, name, username;
  bool password_stdin = false;
  std::vector<std::string> frameworks;
};

// The password from stdin's first line (never a flag: it would show in ps
// and the shell's history).
int pull_image(const PullOptions& o) {
  namespace request = api::fields::ImagePullRequest;
  json body = {{key(request::reference), o.reference}};
  if (!o.name.empty()) body[key(request::name)] = o.name;
  if (!o.frameworks.empty()) body[key(request::frameworks)] = o.frameworks;
  if (o.password_stdin != !o.username.empty())
    return usage_error("--username and --password-stdin go together", "give both, or neither for an anonymous pull");
  if (o.password_stdin) {
    std::string password;
    std::getline(std::cin, password);
    if (!password.empty() && password.back() == '\r') password.pop_back();
    body[key(request::username)] = o.username;
    body[key(request::password)] = password;
  }
  Client client(load_endpoint());
  json out;
  auto post = [&] { return client.call("POST", "/images/pull", &body, &out); };
  if (auto f = with_pull_progress(o.name, o.reference, post)) return fail(*f);
  namespace pulled = api::fields::ImagePulled;
  const json& image = out[key(pulled::image)];
  printf("image %s pulled from %s (%s, %llu MiB unpacked): %llu blobs fetched, %llu bytes; %llu blobs reused\n",
         image[key(api::fields::Image::name)].get<std::string>().c_str(),
         image[key(api::fields::Image::source)].get<std::string>().c_str(),
         image[key(api::fields::Image::digest)].get<std::string>().c_str(),
         static_cast<unsigned long long>(image[key(api::fields::Image::size_bytes)].get<uint64_t>() >> 20),
         static_cast<unsigned long long>(out[key(pulled::fetched_blobs)].get<uint64_t>()),
         static_cast<unsigned long long>(out[key(pulled::fetched_bytes)].get<uint64_t>()),
         static_cast<unsigned long long>(out[key(pulled::reused_blobs)].get<uint64_t>()));
  return 0;
}

int list_pulls(const std::string& output) {
  namespace progress = api::fields::ImagePullProgress;
  json pulls;
  if (int code = get_list("/images/pulls", api::fields::ImagePullList::pulls, &pulls)) return code;
  if (print_json_if_asked(output, pulls)) return 0;
  std::vector<std::vector<std::string>> rows = {{"NAME", "REFERENCE", "PROGRESS"}};
  for (const auto& p : pulls) rows.push_back({p[key(progress::name)], p[key(progress::reference)], describe_pull(p)});
  print_table(rows);
  return 0;
}

int delete_image(const ImageOptions& o) {
  Client client(load_endpoint());
  if (auto f = client.call("DELETE", "/images/" + o.name, nullptr, nullptr)) return fail(*f);
  printf("image %s deleted\n", o.name.c_str());
  return 0;
}

int list_gpus(const std::string& output) {
  namespace gpu = api::fields::Gpu;
  json gpus;
  if (int code = get_list("/gpus", api::fields::GpuList::gpus, &gpus)) return code;
  if (print_json_if_asked(output, gpus)) return 0;
  std::vector<std::vector<std::string>> rows = {{"INDEX", "MODEL", "SIMULATED", "HELD BY"}};
  for (const auto& g : gpus) {
    // edtd names only your own holders: another user's shows as held.
    std::string holder = g[key(gpu::holder)];
    if (holder.empty() && g[key(gpu::held)].get<bool>()) holder = "(another user)";
    rows.push_back({std::to_string(g[key(gpu::index)].get<int>()), g[key(gpu::model)],
                    g[key(gpu::simulated)].get<bool>() ? "yes" : "no", holder});
  }
  print_table(rows);
  return 0;
}

int list_jobs(const std::string& cluster, const std::string& output) {
  namespace job = api::fields::Job;
  json jobs;
  if (int code = get_list("/clusters/" + cluster + "/jobs", api::fields::JobList::jobs, &jobs)) return code;
  if (print_json_if_asked(output, jobs)) return 0;
  std::vector<std::vector<std::string>> rows = {{"ID", "CONTAINER", "STATE", "EXIT", "COMMAND"}};
  for (const auto& j : jobs)
    rows.push_back({std::to_string(j[key(job::id)].get<int64_t>()), j[key(job::container)], j[key(job::state)],
                    std::to_string(j[key(job::exit_code)].get<int>()), j[key(job::command)]});
  print_table(rows);
  return 0;
}

int delete_job(const std::string& id) {
  Client client(load_endpoint());
  if (auto f = client.call("DELETE", "/jobs/" + id, nullptr, nullptr)) return fail(*f);
  printf("job %s deleted\n", id.c_str());
  return 0;
}

// edt job list CLUSTER [-o json], edt job delete ID.
void add_job_commands(CLI::App& app, Action* action) {
  auto* job = app.add_subcommand("job", "jobs: commands run by edt exec and edt run, with their logs");
  job->require_subcommand(1);
  auto cluster = std::make_shared<std::string>(), output = std::make_shared<std::string>();
  auto* list = job->add_subcommand("list", "list a cluster's jobs, newest first");
  list->add_option("cluster", *cluster)->required();
  add_output_option(list, output.get());
  list->callback([cluster, output, action] { *action = [cluster, output] { return list_jobs(*cluster, *output); }; });
  auto id = std::make_shared<std::string>();
  auto* delete_cmd = job->add_subcommand("delete", "delete an ended job and its log (a job also goes with its cluster)");
  delete_cmd->add_option("id", *id)->required()->check(CLI::PositiveNumber);
  delete_cmd->callback([id, action] { *action = [id] { return delete_job(*id); }; });
}

// Adds GROUP list [-o json] running `run`.
void add_list(CLI::App& app, const std::string& group, const std::string& help, const std::string& list_help,
              Action* action, int (*run)(const std::string&)) {
  auto* cmd = app.add_subcommand(group, help);
  cmd->require_subcommand(1);
  auto output = std::make_shared<std::string>();
  auto* list = cmd->add_subcommand("list", list_help);
  add_output_option(list, output.get());
  list->callback([output, action, run] { *action = [output, run] { return run(*output); }; });
}

void add_volume_commands(CLI::App& app, Action* action) {
  auto* volume = app.add_subcommand("volume", "storage volumes");
  volume->require_subcommand(1);
  auto create = std::make_shared<VolumeOptions>();
  auto* create_cmd = volume->add_subcommand("create", "create a volume");
  create_cmd->add_option("name", create->name)->required();
  create_cmd->add_option("--host-path", create->host_path, "register an existing host directory (admin)");
  create_cmd->callback([create, action] { *action = [create] { return create_volume(*create); }; });

  auto list_output = std::make_shared<std::string>();
  auto* list = volume->add_subcommand("list", "list volumes");
  add_output_option(list, list_output.get());
  list->callback([list_output, action] { *action = [list_output] { return list_volumes(*list_output); }; });

  auto remove = std::make_shared<VolumeOptions>();
  auto* delete_cmd = volume->add_subcommand("delete", "delete a volume no cluster mounts");
  delete_cmd->add_option("name", remove->name)->required();
  delete_cmd->callback([remove, action] { *action = [remove] { return delete_volume(*remove); }; });

  auto upload = std::make_shared<VolumeOptions>();
  auto* upload_cmd = volume->add_subcommand("upload", "copy a local file into a volume (replacing one of that name)");
  upload_cmd->add_option("name", upload->name, "the volume")->required();
  upload_cmd->add_option("file", upload->local_file, "the local file")->required();
  upload_cmd->add_option("--as", upload->as, "its path in the volume, e.g. data/train.csv (default: the file's name)");
  upload_cmd->callback([upload, action] { *action = [upload] { return upload_file(*upload); }; });
}

void add_image_commands(CLI::App& app, Action* action) {
  auto* image = app.add_subcommand("image", "images");
  image->require_subcommand(1);
  auto list_output = std::make_shared<std::string>();
  auto* list = image->add_subcommand("list", "list images, their frameworks, sizes and sources");
  add_output_option(list, list_output.get());
  list->callback([list_output, action] { *action = [list_output] { return list_images(*list_output); }; });

  auto in = std::make_shared<ImageOptions>();
  auto* import_cmd = image->add_subcommand(
      "import", "import an OCI layout (a directory or a tar) or a docker/podman save archive (admin; edtd reads the "
                "path on its own host)");
  import_cmd->add_option("source", in->source, "FILE or DIR")->required();
  import_cmd->add_option("--name", in->name, "the image's name (default: the file's name)");
  import_cmd->add_option("--framework", in->frameworks,
                         "a framework it carries, repeatable (default: its label org.edt.frameworks, else horovod)");
  import_cmd->callback([in, action] { *action = [in] { return import_image(*in); }; });

  auto pull = std::make_shared<PullOptions>();
  auto* pull_cmd = image->add_subcommand(
      "pull", "pull an image from an OCI registry (admin; edtd fetches it from its own host)");
  pull_cmd->add_option("reference", pull->reference, "REGISTRY/REPOSITORY:TAG or ...@sha256:HEX")->required();
  pull_cmd->add_option("--name", pull->name, "the image's name (default: the repository's last name and the tag)");
  pull_cmd->add_option("--framework", pull->frameworks,
                       "a framework it carries, repeatable (default: its label org.edt.frameworks, else horovod)");
  pull_cmd->add_option("--username", pull->username, "the registry's user");
  pull_cmd->add_flag("--password-stdin", pull->password_stdin, "read the registry's password from stdin");
  pull_cmd->callback([pull, action] { *action = [pull] { return pull_image(*pull); }; });

  auto pulls_output = std::make_shared<std::string>();
  auto* pulls = image->add_subcommand("pulls", "list the pulls under way and how far each has come");
  add_output_option(pulls, pulls_output.get());
  pulls->callback([pulls_output, action] { *action = [pulls_output] { return list_pulls(*pulls_output); }; });

  auto out = std::make_shared<ImageOptions>();
  auto* rm = image->add_subcommand("rm", "delete an image no cluster uses (admin), freeing its store space");
  rm->add_option("name", out->name)->required();
  rm->callback([out, action] { *action = [out] { return delete_image(*out); }; });
}

}  // namespace

void add_resource_commands(CLI::App& app, Action* action) {
  add_volume_commands(app, action);
  add_job_commands(app, action);
  add_image_commands(app, action);
  add_list(app, "gpu", "GPUs", "list the GPU inventory", action, list_gpus);
}

}  // namespace edt::cli

// edt volume create|list|delete|upload, edt job list|delete, edt image list, edt gpu list.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
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
  std::vector<std::vector<std::string>> rows = {{"NAME", "FRAMEWORKS", "ROOT"}};
  for (const auto& i : images) {
    std::string frameworks;
    for (const auto& f : i[key(image::frameworks)]) frameworks += (frameworks.empty() ? "" : ",") + f.get<std::string>();
    rows.push_back({i[key(image::name)], frameworks, i[key(image::root)]});
  }
  print_table(rows);
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

}  // namespace

void add_resource_commands(CLI::App& app, Action* action) {
  add_volume_commands(app, action);
  add_job_commands(app, action);
  add_list(app, "image", "images", "list images and their frameworks", action, list_images);
  add_list(app, "gpu", "GPUs", "list the GPU inventory", action, list_gpus);
}

}  // namespace edt::cli

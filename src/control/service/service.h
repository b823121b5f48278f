// Service: every operation of the control plane, as functions of who asks
// and what they ask for: create, scale and delete clusters; volumes,
// images, users and tokens; jobs (run by the JobRunner); a cluster's SSH
// access (the backend's keys); reads with the owner rules. It is the only
// front door: the HTTP edge (api/) and the console only parse requests,
// call the Service and map its refusals to status codes; edtd's other parts
// (CLI tests) call the same functions.
//
// Each change runs in one database transaction that checks what it must
// (ownership, the catalog, names taken), allots addresses and GPUs
// (allocation.h), writes the rows and the cluster's event, and commits; a
// refusal changes nothing. After the commit it requests a reconcile of the
// cluster. A crash between the commit and that request loses only the
// request: the reconciler re-lists every cluster on start and on every
// periodic resync, and reconcile is level-based, so the change is acted on
// within one resync period.
//
// Owner rules: a user sees and changes only their own clusters, volumes,
// jobs and tokens; the admin sees all and alone makes and deletes users and
// registers images. Another user's cluster, volume or job is answered for
// as if it did not exist (NotFound, the same words), so a read tells no one
// another's names. Cluster and volume names stay one namespace for all users
// (a cluster's name is its containers' host names and its sandboxes' and
// volume directories' names), so a create can still find a name taken; its
// Conflict names no owner. The GPU inventory names a holder only to the
// holder's owner and the admin.
//
// Tokens: each has an id, a description and an optional expiry; an expired
// or revoked token, or one whose user was deleted, authenticates no one
// from the next request on. A user is deleted only when they own no
// cluster and no volume (delete those first; the admin may); the admin
// cannot be deleted.
// Thread-safe (the database serialises transactions).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/allocation/allocation.h"
#include "control/backends/local/disk_quota.h"
#include "control/backends/backend.h"
#include "control/db/database.h"
#include "control/jobs/job_runner.h"
#include "control/model/catalog.h"
#include "control/model/cluster.h"
#include "control/model/error.h"
#include "control/model/job.h"
#include "control/model/requests.h"
#include "control/model/teams.h"
#include "control/service/image_pulls.h"
#include "control/service/volume_files.h"
#include "image/registry.h"

namespace edt::control {

struct ServiceOptions {
  AddressRange addresses;  // containers' addresses come from here
  std::string data_dir;    // managed volumes are made under <data_dir>/volumes
  // Asks the reconciler to look at a cluster soon; any thread.
  std::function<void(const std::string& cluster)> request_reconcile;
  // Each managed volume's bound: bytes > 0 makes the volume a disk of its
  // own (disk_quota.h), <data_dir>/volume-disks/<name>.disk loop-mounted at
  // its directory, so a full volume fills itself and not the host; 0 (the
  // default): a plain directory. edtd gives 0 where bounded disks are
  // unavailable, and under Slurm (a loop mount is not seen by the nodes).
  DiskBound volume_disk{};
  // What runs jobs and holds the clusters' SSH keys; the job and SSH
  // operations need them (a Service without them refuses those, kInternal).
  JobRunner* jobs = nullptr;
  Backend* backend = nullptr;
  // The image store (docs/images.md) that imports and pulls go to; empty:
  // they are refused.
  std::string image_store = "";
  // How pulls reach registries: a CA file, mirrors (image/registry.h).
  image::RegistryOptions registry = {};
};

// What a cluster's owner needs to reach its containers over SSH.
struct SshAccess {
  Cluster cluster;
  std::string private_key;
  std::string known_hosts;
  int port = 0;
  // Each container's sshd (Backend::ssh_endpoint), by name.
  std::map<std::string, SshEndpoint> endpoints;
};

// A job's log, for streaming: where it is, and whether the job still runs
// (its log may still grow).
struct JobLog {
  Job job;
  std::string path;
  std::function<bool()> running;
};

// A token as made, with the one copy of the token itself.
struct NewToken {
  TokenInfo info;
  std::string token;
};

// "only the admin may <action>": the refusal every admin-only operation gives.
Status admin_only(const std::string& action);

class Service {
 public:
  Service(Database* db, ServiceOptions options);

  // Startup: the built-in image, the GPU inventory (held GPUs keep their
  // holder), and an admin if there is none; returns the admin's new token
  // then (nullopt when an admin existed).
  Status set_inventory(const Image& builtin, const std::vector<Gpu>& gpus);
  Result<std::optional<std::string>> ensure_admin();

  // The user a token belongs to, or nullopt (unknown, revoked or expired).
  std::optional<User> authenticate(const std::string& token);

  // Clusters. A cluster with GPUs goes through the scheduler
  // (allocation/schedule.h): placed at once if its GPUs are free and its
  // team's quota allows, otherwise queued (phase Pending, status.queued with
  // its reason and position) until they are; more GPUs than the machine has
  // at all is refused. An elastic cluster is sized by the scheduler: a scale
  // of it is refused.
  Result<Cluster> create_cluster(const User& by, const ClusterSpec& spec);
  // A scale up that must wait for GPUs is queued (the cluster keeps its size
  // until it is placed); a new scale withdraws a queued one. A scale down marks the highest containers leaving: they leave the
  // hostfile and drain (reconciler.h). `drain_timeout`, when given, becomes
  // the cluster's setting, this scale's drain included.
  Result<Cluster> scale_cluster(const User& by, const std::string& name, int containers,
                                 std::optional<std::chrono::milliseconds> drain_timeout = std::nullopt);
  // Marks the cluster and its containers for removal; returns it as marked.
  Result<Cluster> delete_cluster(const User& by, const std::string& name);
  Result<Cluster> cluster(const User& by, const std::string& name);
  std::vector<Cluster> clusters(const User& by);
  // `cluster` as the API shows it: each container at the address users
  // reach it by (Backend::shown_address), not its slot in the store.
  Cluster shown(Cluster cluster);
  Result<std::vector<ClusterEvent>> events(const User& by, const std::string& name);
  // The container records of a cluster `by` may see (for jobs and terminals).
  Result<std::vector<ContainerRecord>> containers(const User& by, const std::string& name);
  // The key, known_hosts and port that reach the cluster's containers;
  // refused (Conflict, field "name") until the backend has made them.
  Result<SshAccess> ssh_access(const User& by, const std::string& name);

  // Volumes.
  Result<Volume> create_volume(const User& by, const VolumeRequest& request);
  Result<Volume> delete_volume(const User& by, const std::string& name);
  std::vector<Volume> volumes(const User& by);
  // Startup: mounts each managed volume's disk that is not mounted (the
  // host restarted: the disk file stayed, its mount did not). A volume made
  // as a plain directory (no disk file) stays one.
  Status remount_volumes();
  // Writes `bytes` to `path` in the volume (volume_files.h), for its owner
  // or the admin; another user's volume is missing.
  Result<VolumeFile> upload_file(const User& by, const std::string& volume, const std::string& path,
                                  std::string_view bytes);
  // The entries of directory `path` ("" the top) of a volume `by` may see,
  // at most `limit`; its file opened for reading; a file or directory (with
  // what it holds) deleted, returning how many entries went (volume_files.h).
  Result<VolumeListing> volume_files(const User& by, const std::string& volume, const std::string& path,
                                     size_t limit);
  Result<OpenedVolumeFile> open_volume_file(const User& by, const std::string& volume, const std::string& path);
  Result<int64_t> delete_volume_file(const User& by, const std::string& volume, const std::string& path);

  // Images and GPUs.
  Result<Image> register_image(const User& by, const Image& image);
  // Imports an OCI layout or docker save archive at `request.path` (on
  // edtd's host) into the image store (admin: images.cc says why); the
  // store's refusal of a bad source is kInvalidArgument, and leaves nothing.
  Result<Image> import_image(const User& by, const ImageImport& request);
  // Pulls an image from a registry into the image store (admin, as
  // imports); the credentials serve this pull only.
  Result<PulledImage> pull_image(const User& by, const ImagePull& request);
  // The pulls under way and their progress (every user: no credentials).
  std::vector<ImagePullState> image_pulls() const;
  // Removes an image no cluster uses (admin), freeing what the store kept
  // for it alone; the built-in image stays.
  Result<Image> delete_image(const User& by, const std::string& name);
  std::vector<Image> images();
  // The inventory as `by` may see it: another user's holder is blanked
  // (held stays true).
  std::vector<Gpu> gpus(const User& by);

  // Teams and quotas (teams.h): the admin makes and deletes teams, assigns
  // users and sets quotas; a user sees their own team, the admin all.
  Result<Team> create_team(const User& by, const std::string& name);
  Result<Team> delete_team(const User& by, const std::string& name);
  Result<std::vector<Team>> teams(const User& by);
  Result<Team> team(const User& by, const std::string& name);
  // Quotas by GPU model; a model that is not in the inventory is refused.
  Result<Team> set_quota(const User& by, const Quota& quota);
  Result<Team> delete_quota(const User& by, const std::string& team, const std::string& model);
  // "" takes the user out of their team.
  Result<User> set_user_team(const User& by, const std::string& user, const std::string& team);

  // Users and tokens.
  Result<std::vector<User>> users(const User& by);
  Result<NewToken> create_user(const User& by, const std::string& name);
  // Refused while `name` owns a cluster (even one being deleted) or a volume.
  Result<User> delete_user(const User& by, const std::string& name);
  // Tokens of `user`, made, listed and revoked by that user or the admin.
  Result<NewToken> create_token(const User& by, const std::string& user, const TokenRequest& request = {});
  Result<std::vector<TokenInfo>> tokens(const User& by, const std::string& user);
  Result<TokenInfo> revoke_token(const User& by, const std::string& user, int64_t id);

  // Jobs. A job `by` may see, refreshed (as recorded without a JobRunner).
  Result<Job> job(const User& by, int64_t id);
  // Starts the request's command in its container (the launcher's when it
  // names none) of a cluster `by` may see.
  Result<Job> start_job(const User& by, const std::string& cluster, const JobRequest& request);
  // The jobs of a cluster `by` may see, newest first, refreshed.
  Result<std::vector<Job>> jobs(const User& by, const std::string& cluster);
  // Deletes an ended job (JobRunner::remove); a running one is a Conflict.
  Result<Job> delete_job(const User& by, int64_t id);
  Result<JobLog> job_log(const User& by, int64_t id);

  // The database's version (see Database::Tx::version).
  int64_t version();

 private:
  // Refuses a user deleted since their request was authenticated, so that
  // nothing new is owned by a user who is gone.
  Status check_still_a_user(Database::Tx& tx, const User& by);
  // Refuses `by` acting on the tokens of `user` (theirs alone, or the
  // admin's), and a user that does not exist.
  Status check_token_owner(Database::Tx& tx, const User& by, const std::string& user);
  // The cluster in `tx` if `by` may see it.
  Result<Cluster> owned_cluster(Database::Tx& tx, const User& by, const std::string& name);
  // Allots containers [from, to) of `spec` in `tx`: addresses, GPUs, rows.
  Status allot(Database::Tx& tx, const ClusterSpec& spec, int from, int to);
  // Commits `tx`, then asks for a reconcile of `cluster`, of the clusters
  // the scheduler changed in it (`scheduled`) and a scheduler pass.
  Status commit_and_reconcile(Database::Tx& tx, const std::string& cluster,
                              const std::vector<std::string>& scheduled = {});
  // Queues `cluster`'s request for `containers` in `tx` and runs the
  // scheduler's step there (placed at once if the policy admits it; a
  // Queued event if not); returns the clusters the step changed.
  Result<std::vector<std::string>> queue_request(Database::Tx& tx, const Cluster& cluster, int containers);
  // Refuses a team name no team has (field `field`).
  Status check_team(Database::Tx& tx, const std::string& team, const std::string& field);
  // A managed volume's disk file (volume_disk): beside the volumes, never in one.
  std::string volume_disk_image(const std::string& name) const;
  // ": it is bounded to N MiB ..." for a volume on a disk of its own, else "".
  std::string volume_bound_text(const Volume& v) const;
  // Makes, or removes, the directory of managed volume `v`.
  Status make_volume_dir(const Volume& v) const;
  Status remove_volume_dir(const Volume& v) const;
  // The volume `name` if `by` may see it (the owner's or the admin's);
  // another user's is missing.
  Result<Volume> visible_volume(const User& by, const std::string& name);
  // Refuses (kInternal) an operation whose part (jobs, backend) edtd did not give.
  Status check_has(const void* part, const std::string& what) const;

  Database* db_;
  ServiceOptions options_;
  std::shared_ptr<ImagePulls> pulls_ = std::make_shared<ImagePulls>();
};

}  // namespace edt::control

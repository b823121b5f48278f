// Communicator: forms the group through the store, picks transports and
// algorithms, checks every collective's arguments across ranks, and runs the
// ops in submission order (inline for blocking calls when nothing is queued,
// otherwise on the background thread).
#include "edt/communicator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/descriptor.h"
#include "collectives/reduce.h"
#include "collectives/shm_allreduce.h"
#include "common/net.h"
#include "common/units.h"
#include "edt/tcp_store.h"
#include "transport/shm/segment.h"
#include "transport/tcp/tcp_channel.h"

namespace edt {
namespace {

using collectives::Descriptor;
using collectives::Group;
using collectives::OpKind;
using transport::Clock;

// How long waits spin before they yield (CommunicatorOptions::spin; see
// transport::Backoff).
constexpr auto kSpinWithCoreEach = std::chrono::milliseconds(5);
constexpr auto kSpinSharingCores = std::chrono::microseconds(2);

class WorkImpl final : public Work {
 public:
  Status wait(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return done_; }))
      return timeout_error("the collective did not finish within " + std::to_string(timeout.count()) +
                           " ms; it is still running (wait again, or abort the communicator)");
    return status_;
  }
  bool is_completed() const override {
    std::lock_guard lock(mu_);
    return done_;
  }
  void finish(Status status) {
    {
      std::lock_guard lock(mu_);
      status_ = std::move(status);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

struct RankInfo {
  std::string host;
  std::string address;  // host:port of its TCP listener
  int pid = 0;
  uint64_t start_time = 0;
};

std::string encode(const RankInfo& info) {
  return info.host + "\n" + info.address + "\n" + std::to_string(info.pid) + "\n" + std::to_string(info.start_time);
}

Result<RankInfo> decode(const std::string& text, int rank) {
  std::istringstream in(text);
  RankInfo info;
  std::string pid, start;
  if (!std::getline(in, info.host) || !std::getline(in, info.address) || !std::getline(in, pid) ||
      !std::getline(in, start))
    return invalid_argument("rank " + std::to_string(rank) + " registered malformed data in the store: '" + text +
                            "'; is it running the same edt version?");
  info.pid = std::stoi(pid);
  info.start_time = std::stoull(start);
  return info;
}

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// The address peers should connect to: the bind address if given, the host
// identity if it is an IP address or a resolvable name, else loopback (ranks
// that share a made-up host identity are on this machine).
std::string advertised_address(const CommunicatorOptions& options, const std::string& host) {
  if (!options.bind_address.empty()) return options.bind_address;
  in_addr a4;
  in6_addr a6;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* out = nullptr;
  std::string address = "127.0.0.1";
  if (getaddrinfo(host.c_str(), nullptr, &hints, &out) == 0 && out) {
    char buf[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(out->ai_addr)->sin_addr, buf, sizeof buf)) address = buf;
    freeaddrinfo(out);
  }
  return address;
}

class CommunicatorImpl final : public Communicator, public std::enable_shared_from_this<CommunicatorImpl> {
 public:
  CommunicatorImpl() = default;
  ~CommunicatorImpl() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  Status init(std::shared_ptr<Store> store, const CommunicatorOptions& options);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return static_cast<int>(local_members_.size()); }
  int cross_rank() const override { return cross_rank_; }
  int cross_size() const override { return cross_size_; }
  const std::string& host() const override { return infos_[rank_].host; }
  std::string transport_name() const override { return transport_name_; }

  Status allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return run_blocking([=, this] { return do_allreduce(send, recv, count, type, op); });
  }
  Status broadcast(void* buf, size_t count, DataType type, int root) override {
    return run_blocking([=, this] { return do_broadcast(buf, count, type, root); });
  }
  Status allgather(const void* send, void* recv, size_t count, DataType type) override {
    return run_blocking([=, this] { return do_allgather(send, recv, count, type); });
  }
  Status allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type) override {
    return run_blocking([=, this] { return do_allgatherv(send, recv, recv_counts, type); });
  }
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) override {
    return run_blocking([=, this] { return do_reduce_scatter(send, recv, recv_count, type, op); });
  }
  Status alltoall(const void* send, void* recv, size_t count, DataType type) override {
    return run_blocking([=, this] { return do_alltoall(send, recv, count, type); });
  }
  Status barrier() override {
    return run_blocking([this] { return do_barrier(); });
  }

  std::shared_ptr<Work> allreduce_async(const void* send, void* recv, size_t count, DataType type,
                                        ReduceOp op) override {
    return submit([=, this] { return do_allreduce(send, recv, count, type, op); });
  }
  std::shared_ptr<Work> broadcast_async(void* buf, size_t count, DataType type, int root) override {
    return submit([=, this] { return do_broadcast(buf, count, type, root); });
  }
  std::shared_ptr<Work> allgather_async(const void* send, void* recv, size_t count, DataType type) override {
    return submit([=, this] { return do_allgather(send, recv, count, type); });
  }
  std::shared_ptr<Work> allgatherv_async(const void* send, void* recv, std::vector<size_t> recv_counts,
                                         DataType type) override {
    return submit([=, this] { return do_allgatherv(send, recv, recv_counts, type); });
  }
  std::shared_ptr<Work> reduce_scatter_async(const void* send, void* recv, size_t recv_count, DataType type,
                                             ReduceOp op) override {
    return submit([=, this] { return do_reduce_scatter(send, recv, recv_count, type, op); });
  }
  std::shared_ptr<Work> alltoall_async(const void* send, void* recv, size_t count, DataType type) override {
    return submit([=, this] { return do_alltoall(send, recv, count, type); });
  }
  std::shared_ptr<Work> barrier_async() override {
    return submit([this] { return do_barrier(); });
  }

  void abort() override { transport_->abort(); }

 private:
  using Op = std::function<Status()>;

  // --- ordering -----------------------------------------------------------

  Status run_blocking(Op op) {
    std::unique_lock lock(mu_);
    if (queue_.empty() && !busy_) {
      busy_ = true;
      lock.unlock();
      Status s = op();
      lock.lock();
      busy_ = false;
      lock.unlock();
      cv_.notify_all();
      return s;
    }
    lock.unlock();
    return submit(std::move(op))->wait();
  }

  std::shared_ptr<Work> submit(Op op) {
    auto work = std::make_shared<WorkImpl>();
    {
      std::lock_guard lock(mu_);
      if (!worker_.joinable()) worker_ = std::thread([this] { work_loop(); });
      queue_.emplace_back(std::move(op), work);
    }
    cv_.notify_all();
    return work;
  }

  void work_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !busy_); });
      if (queue_.empty()) return;  // stopping
      auto [op, work] = std::move(queue_.front());
      queue_.pop_front();
      if (stopping_) {
        work->finish(aborted("the communicator was destroyed before this op ran"));
        continue;
      }
      busy_ = true;
      lock.unlock();
      work->finish(op());
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  // --- descriptors --------------------------------------------------------

  // Publishes this rank's descriptor and checks everyone's.
  Status agree(Descriptor mine, const std::vector<size_t>* recv_counts) {
    EDT_RETURN_IF_ERROR(transport_->broken());
    mine.seq = seq_++;
    std::vector<Descriptor> all(size_);
    if (single_segment()) {
      std::vector<std::vector<uint8_t>> raw;
      EDT_RETURN_IF_ERROR(shm_->round_with_descriptor(&mine, sizeof mine, &raw));
      for (int r = 0; r < size_; ++r) std::memcpy(&all[r], raw[r].data(), sizeof(Descriptor));
    } else {
      std::vector<transport::Send> sends;
      std::vector<transport::Recv> recvs;
      all[rank_] = mine;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        sends.push_back({r, &mine, sizeof mine});
        recvs.push_back({r, &all[r], sizeof(Descriptor)});
      }
      EDT_RETURN_IF_ERROR(transport_->exchange(sends, recvs));
    }
    return check_descriptors(all, recv_counts);
  }

  bool single_segment() const { return shm_ && static_cast<int>(local_members_.size()) == size_; }

  // A descriptor for arguments this rank finds invalid: still exchanged, so
  // the others fail too instead of waiting.
  Status reject(Descriptor d, Status why) {
    d.bad_arguments = 1;
    Status agreed = agree(d, nullptr);
    if (agreed.code() != StatusCode::kInvalidArgument) return agreed;  // the transport broke
    return why;
  }

  static Status null_buffer(const char* op, const char* which) {
    return invalid_argument(std::string(op) + ": " + which + " is null but the count is not 0");
  }

  // --- collectives --------------------------------------------------------

  Status do_allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
    Descriptor d{.count = count, .kind = OpKind::kAllreduce, .type = type, .op = op};
    if (count > 0 && (!send || !recv)) return reject(d, null_buffer("allreduce", !send ? "send" : "recv"));
    if (single_segment()) {
      // The argument check rides on the first round of the data.
      EDT_RETURN_IF_ERROR(transport_->broken());
      d.seq = seq_++;
      collectives::ShmAllreduce::Agreement agreement{&d, sizeof d, [&](const auto& raw) {
                                                       std::vector<Descriptor> all(size_);
                                                       for (int r = 0; r < size_; ++r)
                                                         std::memcpy(&all[r], raw[r].data(), sizeof(Descriptor));
                                                       return check_descriptors(all, nullptr);
                                                     }};
      return shm_->allreduce(send, recv, count, type, op, &agreement);  // averages divided as reduced
    }
    EDT_RETURN_IF_ERROR(agree(d, nullptr));
    EDT_RETURN_IF_ERROR(allreduce_data(send, recv, count, type, collectives::combining_op(op)));
    if (op == ReduceOp::kAverage) collectives::finish_average(recv, count, type, size_);
    return Status::ok();
  }

  Status allreduce_data(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
    if (count == 0) return Status::ok();
    const size_t bytes = count * dtype_size(type);
    if (!hierarchical_ && !shm_) return collectives::allreduce(world(), send, recv, count, type, op);
    // Inside the host over shared memory, then across hosts among one leader
    // per host, then from each leader to the rest of its host.
    const void* host_sum = send;
    if (shm_) {
      EDT_RETURN_IF_ERROR(shm_->allreduce(send, recv, count, type, op));
      host_sum = recv;
    }
    if (!hierarchical_) return Status::ok();
    if (local_rank_ == 0) EDT_RETURN_IF_ERROR(collectives::allreduce(leader_group(), host_sum, recv, count, type, op));
    return collectives::broadcast(local_group(), recv, bytes, 0);
  }

  Status do_broadcast(void* buf, size_t count, DataType type, int root) {
    Descriptor d{.count = count, .root = root, .kind = OpKind::kBroadcast, .type = type};
    if (root < 0 || root >= size_)
      return reject(d, invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of this " +
                                        std::to_string(size_) + "-rank communicator"));
    if (count > 0 && !buf) return reject(d, null_buffer("broadcast", "buf"));
    EDT_RETURN_IF_ERROR(agree(d, nullptr));
    return collectives::broadcast(world(), buf, count * dtype_size(type), root);
  }

  Status do_allgather(const void* send, void* recv, size_t count, DataType type) {
    return gather(OpKind::kAllgather, send, recv, std::vector<size_t>(size_, count), type);
  }

  Status do_allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type) {
    return gather(OpKind::kAllgatherv, send, recv, recv_counts, type);
  }

  Status gather(OpKind kind, const void* send, void* recv, const std::vector<size_t>& counts, DataType type) {
    const char* name = collectives::op_kind_name(kind);
    Descriptor d{.kind = kind, .type = type};
    if (counts.size() != size_t(size_))
      return reject(d, invalid_argument(std::string(name) + ": recv_counts has " + std::to_string(counts.size()) +
                                        " entries; it needs one per rank (" + std::to_string(size_) + ")"));
    d.count = counts[rank_];
    if (kind == OpKind::kAllgatherv) d.layout = collectives::hash_counts(counts);
    size_t total = 0;
    for (size_t c : counts) total += c;
    if ((d.count > 0 && !send) || (total > 0 && !recv))
      return reject(d, null_buffer(name, !send ? "send" : "recv"));
    EDT_RETURN_IF_ERROR(agree(d, kind == OpKind::kAllgatherv ? &counts : nullptr));
    const size_t es = dtype_size(type);
    std::vector<size_t> offsets(size_ + 1, 0);
    for (int r = 0; r < size_; ++r) offsets[r + 1] = offsets[r] + counts[r] * es;
    uint8_t* mine = static_cast<uint8_t*>(recv) + offsets[rank_];
    if (mine != send && d.count > 0) std::memmove(mine, send, d.count * es);
    return collectives::ring_allgather(world(), recv, offsets);
  }

  Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) {
    Descriptor d{.count = recv_count, .kind = OpKind::kReduceScatter, .type = type, .op = op};
    if (recv_count > 0 && (!send || !recv)) return reject(d, null_buffer("reduce_scatter", !send ? "send" : "recv"));
    EDT_RETURN_IF_ERROR(agree(d, nullptr));
    if (recv_count == 0) return Status::ok();
    const size_t es = dtype_size(type);
    std::vector<uint8_t> work(recv_count * es * size_t(size_));
    std::vector<size_t> offsets(size_ + 1);
    for (int r = 0; r <= size_; ++r) offsets[r] = recv_count * size_t(r);
    EDT_RETURN_IF_ERROR(collectives::ring_reduce_scatter(world(), send, work.data(), offsets, type, op));
    std::memcpy(recv, work.data() + offsets[rank_] * es, recv_count * es);
    if (op == ReduceOp::kAverage) collectives::finish_average(recv, recv_count, type, size_);
    return Status::ok();
  }

  Status do_alltoall(const void* send, void* recv, size_t count, DataType type) {
    Descriptor d{.count = count, .kind = OpKind::kAlltoall, .type = type};
    if (count > 0 && (!send || !recv)) return reject(d, null_buffer("alltoall", !send ? "send" : "recv"));
    EDT_RETURN_IF_ERROR(agree(d, nullptr));
    const size_t block = count * dtype_size(type);
    std::vector<uint8_t> copy;
    if (send == recv && block > 0) {
      copy.assign(static_cast<const uint8_t*>(send), static_cast<const uint8_t*>(send) + block * size_t(size_));
      send = copy.data();
    }
    return collectives::alltoall(world(), send, recv, block);
  }

  // Agreeing on the descriptor already needs every rank to arrive.
  Status do_barrier() { return agree(Descriptor{.kind = OpKind::kBarrier}, nullptr); }

  Group world() const { return Group{transport_.get(), all_members_, rank_}; }
  Group local_group() const { return Group{transport_.get(), local_members_, local_rank_}; }
  Group leader_group() const { return Group{transport_.get(), leaders_, host_index_}; }

  int rank_ = 0, size_ = 0;
  int local_rank_ = 0, host_index_ = 0;
  int cross_rank_ = 0, cross_size_ = 0;  // Horovod's: see communicator.h
  std::vector<RankInfo> infos_;
  std::vector<int> all_members_, local_members_, leaders_;
  std::string transport_name_;
  // Several hosts, and shared memory inside at least one of them.
  bool hierarchical_ = false;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<collectives::ShmAllreduce> shm_;
  uint64_t seq_ = 0;  // only the thread running ops touches it

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Op, std::shared_ptr<WorkImpl>>> queue_;  // guarded by mu_
  bool busy_ = false;                                             // guarded by mu_
  bool stopping_ = false;                                         // guarded by mu_
  std::thread worker_;
};

Status CommunicatorImpl::init(std::shared_ptr<Store> store, const CommunicatorOptions& options) {
  rank_ = options.rank;
  size_ = options.size;
  if (size_ < 1) return invalid_argument("communicator size is " + std::to_string(size_) + "; it must be at least 1");
  if (rank_ < 0 || rank_ >= size_)
    return invalid_argument("rank " + std::to_string(rank_) + " is outside 0.." + std::to_string(size_ - 1));
  if (options.transport != "auto" && options.transport != "tcp" && options.transport != "shm")
    return invalid_argument("transport '" + options.transport + "' is unknown; use auto, tcp or shm (EDT_TRANSPORT)");
  if (options.timeout.count() <= 0) return invalid_argument("communicator timeout must be positive");
  const auto deadline = Clock::now() + options.timeout;
  auto left = [&] {
    return std::max(std::chrono::duration_cast<Store::Duration>(deadline - Clock::now()), Store::Duration(1));
  };

  // 1. Register, then learn everyone.
  RankInfo me;
  me.host = options.host.empty() ? this_hostname() : options.host;
  if (me.host.find('\n') != std::string::npos) return invalid_argument("host identity may not contain a newline");
  EDT_ASSIGN_OR_RETURN(transport::tcp::Listener listener, transport::tcp::listen_for_peers());
  struct ListenerGuard {
    int* fd;
    ~ListenerGuard() {
      if (*fd >= 0) ::close(*fd);
    }
  } listener_guard{&listener.fd};
  me.address = net::format_host_port(advertised_address(options, me.host), listener.port);
  me.pid = static_cast<int>(::getpid());
  me.start_time = transport::shm::process_start_time(me.pid);
  const std::string key = "rank/" + std::to_string(rank_);
  EDT_ASSIGN_OR_RETURN(std::string stored, store->compare_set(key, "", encode(me)));
  if (stored != encode(me)) {
    auto other = decode(stored, rank_);
    return already_exists("rank " + std::to_string(rank_) + " is already taken in this group (by host " +
                          (other.is_ok() ? other->host + " pid " + std::to_string(other->pid) : "?") +
                          "); every process needs its own rank (EDT_RANK)");
  }
  std::mt19937_64 rng(std::random_device{}());
  EDT_ASSIGN_OR_RETURN(std::string nonce_text, store->compare_set("nonce", "", std::to_string(rng() >> 1)));
  const uint64_t nonce = std::stoull(nonce_text);
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back("rank/" + std::to_string(r));
  Status arrived = store->wait(keys, left());
  if (!arrived.is_ok()) {
    if (arrived.code() != StatusCode::kTimeout) return arrived;
    std::string missing;
    for (int r = 0; r < size_; ++r) {
      auto v = store->try_get(keys[r]);
      if (v.is_ok() && !v->has_value()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    return timeout_error("rank " + std::to_string(rank_) + " waited " + std::to_string(options.timeout.count()) +
                         " ms for the group of " + std::to_string(size_) + " to form; missing rank(s) " + missing +
                         " (did they start? do they use the same EDT_COORDINATOR?)");
  }
  for (int r = 0; r < size_; ++r) {
    EDT_ASSIGN_OR_RETURN(std::string text, store->get(keys[r], left()));
    EDT_ASSIGN_OR_RETURN(RankInfo info, decode(text, r));
    infos_.push_back(std::move(info));
  }

  // 2. Topology: hosts in order of first appearance; host leaders are the
  // lowest rank of each host.
  std::map<std::string, int> host_index;
  std::vector<int> host_of(size_);
  for (int r = 0; r < size_; ++r) {
    auto [it, fresh] = host_index.emplace(infos_[r].host, static_cast<int>(leaders_.size()));
    if (fresh) leaders_.push_back(r);
    host_of[r] = it->second;
    all_members_.push_back(r);
  }
  host_index_ = host_of[rank_];
  for (int r = 0; r < size_; ++r)
    if (host_of[r] == host_index_) local_members_.push_back(r);
  local_rank_ = static_cast<int>(std::find(local_members_.begin(), local_members_.end(), rank_) - local_members_.begin());
  for (int h = 0; h < static_cast<int>(leaders_.size()); ++h) {
    if (std::count(host_of.begin(), host_of.end(), h) <= local_rank_) continue;  // no rank with this local rank
    if (h < host_index_) ++cross_rank_;
    ++cross_size_;
  }
  if (options.transport == "shm" && leaders_.size() > 1)
    return invalid_argument("transport shm needs every rank on one host, but ranks are on " +
                            std::to_string(leaders_.size()) + " hosts (" + infos_[leaders_[0]].host + ", " +
                            infos_[leaders_[1]].host + ", ...); use auto or tcp");
  const bool use_shm = options.transport != "tcp" && local_members_.size() > 1;
  const bool any_tcp = options.transport == "tcp" ? size_ > 1 : leaders_.size() > 1;
  size_t largest_host = 0;
  for (int h = 0; h < static_cast<int>(leaders_.size()); ++h)
    largest_host = std::max<size_t>(largest_host, std::count(host_of.begin(), host_of.end(), h));
  hierarchical_ = options.transport != "tcp" && leaders_.size() > 1 && largest_host > 1;
  transport_name_ = use_shm && any_tcp ? "shm+tcp" : use_shm ? "shm" : any_tcp ? "tcp" : "none";

  // 3. Channels: shared memory to the ranks of this host, TCP to the rest.
  std::vector<std::string> names(size_);
  std::vector<transport::PeerInfo> peers(size_);
  for (int r = 0; r < size_; ++r) {
    names[r] = "rank " + std::to_string(r) + " (host " + infos_[r].host + ")";
    peers[r] = {infos_[r].host, infos_[r].pid};
  }
  std::vector<std::unique_ptr<transport::Channel>> channels(size_);
  std::shared_ptr<transport::shm::Segment> segment;
  if (use_shm) {
    transport::shm::Segment::Options so;
    so.key = "shm/" + std::to_string(host_index_);
    so.local_rank = local_rank_;
    so.local_size = static_cast<int>(local_members_.size());
    so.deadline = deadline;
    auto made = transport::shm::Segment::create(*store, so);
    if (!made.is_ok()) return made.status().with_context("rank " + std::to_string(rank_) + " on host " + me.host);
    segment = std::move(made).value();
    for (int i = 0; i < static_cast<int>(local_members_.size()); ++i) {
      int r = local_members_[i];
      if (r == rank_) continue;
      channels[r] = transport::shm::make_channel(segment, local_rank_, i, names[r], infos_[r].pid,
                                                 infos_[r].start_time, rank_);
    }
  }
  std::vector<bool> tcp_peers(size_, false);
  std::vector<std::string> addresses(size_);
  for (int r = 0; r < size_; ++r) {
    tcp_peers[r] = r != rank_ && !channels[r];
    addresses[r] = infos_[r].address;
  }
  transport::tcp::Listener owned = listener;
  listener.fd = -1;  // connect_mesh closes it
  EDT_RETURN_IF_ERROR(transport::tcp::connect_mesh(rank_, addresses, tcp_peers, owned, nonce, deadline, names,
                                                   &channels));
  std::chrono::nanoseconds spin = options.spin;
  if (spin.count() < 0) {
    const bool core_each = static_cast<int>(local_members_.size()) <= transport::usable_cores();
    spin = core_each ? std::chrono::nanoseconds(kSpinWithCoreEach) : std::chrono::nanoseconds(kSpinSharingCores);
  }
  transport_ = std::make_unique<transport::Transport>(rank_, std::move(peers), std::move(channels), options.timeout,
                                                      spin, segment ? &segment->doorbell(local_rank_) : nullptr);
  if (segment) shm_ = std::make_unique<collectives::ShmAllreduce>(segment, transport_.get(), local_members_, local_rank_);
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<Communicator>> Communicator::create(std::shared_ptr<Store> store,
                                                           const CommunicatorOptions& options) {
  if (!store) return invalid_argument("Communicator::create needs a store");
  auto comm = std::make_shared<CommunicatorImpl>();
  EDT_RETURN_IF_ERROR(comm->init(std::move(store), options));
  return std::shared_ptr<Communicator>(std::move(comm));
}

Result<std::chrono::microseconds> spin_from_env() {
  const char* v = std::getenv("EDT_SPIN_TIME");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "auto") return std::chrono::microseconds(-1);
  char* end = nullptr;
  const double ms = std::strtod(v, &end);
  if (*end != '\0' || !(ms >= 0 && ms <= 60000)) {
    return invalid_argument(std::string("EDT_SPIN_TIME='") + v +
                            "' is not a time in milliseconds (0 to 60000, e.g. 0.05 or 5) or auto");
  }
  return std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
}

Result<std::shared_ptr<Communicator>> Communicator::from_env() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  auto parse_int = [&](const char* name) -> Result<int> {
    std::string v = env(name);
    if (v.empty()) return invalid_argument(std::string(name) + " is not set; start the job with edtrun");
    char* end = nullptr;
    long n = std::strtol(v.c_str(), &end, 10);
    if (*end != '\0' || n < 0 || n > (1 << 20))
      return invalid_argument(std::string(name) + "='" + v + "' is not a valid number");
    return static_cast<int>(n);
  };
  CommunicatorOptions options;
  EDT_ASSIGN_OR_RETURN(options.rank, parse_int("EDT_RANK"));
  EDT_ASSIGN_OR_RETURN(options.size, parse_int("EDT_SIZE"));
  options.host = env("EDT_HOSTNAME");
  if (!env("EDT_TRANSPORT").empty()) options.transport = env("EDT_TRANSPORT");
  if (!env("EDT_TIMEOUT").empty()) {
    auto t = parse_duration(env("EDT_TIMEOUT"));
    if (!t.is_ok()) return t.status().with_context("EDT_TIMEOUT");
    options.timeout = *t;
  }
  EDT_ASSIGN_OR_RETURN(options.spin, spin_from_env());
  const std::string coordinator = env("EDT_COORDINATOR");
  if (coordinator.empty()) return invalid_argument("EDT_COORDINATOR is not set; start the job with edtrun");
  EDT_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, connect_tcp_store(coordinator, options.timeout));
  const std::string generation = env("EDT_GENERATION").empty() ? "0" : env("EDT_GENERATION");
  return create(std::make_shared<PrefixStore>("edt/generation/" + generation, store), options);
}

}  // namespace edt

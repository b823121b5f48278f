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
#include <random>
#include <sstream>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/descriptor.h"
#include "collectives/hierarchical.h"
#include "kernels/reduce.h"
#include "collectives/shm_allreduce.h"
#include "common/net.h"
#include "common/process.h"
#include "common/units.h"
#include "edt/tcp_store.h"
#include "rendezvous/peer_exchange.h"
#include "transport/factory.h"

namespace edt {
namespace {

using collectives::Descriptor;
using collectives::Group;
using collectives::OpKind;
using transport::Clock;
using transport::PeerInfo;

// carries_data(): at most this much of a rank's data goes to its peers
// behind its descriptor (all of them together).
constexpr size_t kDataWithDescriptorBytes = 64 << 10;

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

// A rank's entry in the store: host, address, pid and start time, a line each.
std::string encode(const PeerInfo& info) {
  return info.host + "\n" + info.address + "\n" + std::to_string(info.process.pid) + "\n" +
         std::to_string(info.process.start_time);
}

Result<PeerInfo> decode(const std::string& text, int rank) {
  std::istringstream in(text);
  PeerInfo info;
  std::string pid, start;
  if (!std::getline(in, info.host) || !std::getline(in, info.address) || !std::getline(in, pid) ||
      !std::getline(in, start))
    return invalid_argument("rank " + std::to_string(rank) + " registered malformed data in the store: '" + text +
                            "'; is it running the same edt version?");
  info.process.pid = std::stoll(pid);
  info.process.start_time = std::stoull(start);
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
  int local_rank() const override { return topology_.local_rank; }
  int local_size() const override { return topology_.local_size(); }
  int cross_rank() const override { return topology_.cross_rank; }
  int cross_size() const override { return topology_.cross_size; }
  const std::string& host() const override { return transport_->host(rank_); }
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

  Result<std::shared_ptr<Communicator>> create_subgroup(const std::vector<int>& members,
                                                        const std::string& scope) override;

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

  // Publishes this rank's descriptor and checks everyone's. `data` follows
  // the descriptor to every peer when carries_data(mine); once all agree,
  // everyone's data combined is in combined_.
  Status agree(Descriptor mine, const std::vector<size_t>* recv_counts, const void* data = nullptr) {
    EDT_RETURN_IF_ERROR(transport_->broken());
    mine.seq = seq_++;
    std::vector<Descriptor> all(size_);
    all[rank_] = mine;
    const auto* first = static_cast<const uint8_t*>(data);
    combined_.assign(first, first + data_bytes(mine));
    if (single_segment()) {
      std::vector<std::vector<uint8_t>> raw;
      EDT_RETURN_IF_ERROR(shm_->round_with_descriptor(&mine, sizeof mine, &raw));
      for (int r = 0; r < size_; ++r) std::memcpy(&all[r], raw[r].data(), sizeof(Descriptor));
    } else if (hierarchical_) {
      EDT_RETURN_IF_ERROR(leader_agree(&all));
    } else if (doubling()) {
      EDT_RETURN_IF_ERROR(doubling_agree(&all));
    } else {
      EDT_RETURN_IF_ERROR(exchange_descriptors(&all));
      EDT_RETURN_IF_ERROR(take_data(all, all_members_));
      combine_from(all, all_members_);
    }
    return check_descriptors(all, recv_counts);
  }

  // outbox_ = `table` and, behind it, this rank's data (combined so far):
  // one message, one send, and one segment on the wire for a small
  // allreduce, where two would cost the receiver a second wake-up.
  void pack(std::span<const Descriptor> table) {
    const size_t head = table.size_bytes();
    outbox_.resize(head + combined_.size());
    std::memcpy(outbox_.data(), table.data(), head);
    if (!combined_.empty()) std::memcpy(outbox_.data() + head, combined_.data(), combined_.size());
  }

  // Agreement where the ranks are a power of two (and not all behind one
  // shared-memory segment): recursive doubling. At the step of distance
  // 2^k each rank swaps with rank ^ 2^k the descriptors of the 2^k ranks it
  // has heard from so far, followed, when its own descriptor carries data,
  // by their data combined. log2(size) messages per rank instead of
  // size - 1: across hosts each one costs both ends a trip through the
  // kernel's network stack. Afterwards every rank holds every descriptor
  // and, when all of them agree, everyone's data combined in combined_.
  // Each step combines the lower block with the upper one, in that order,
  // so every rank computes the same bits. What a rank sends depends on its
  // own descriptor alone and the receiver reads the length from it, so the
  // streams stay in step whatever the ranks called.
  Status doubling_agree(std::vector<Descriptor>* all) {
    const Descriptor mine = (*all)[rank_];
    bool combining = !combined_.empty();
    for (int dist = 1; dist < size_; dist <<= 1) {
      const int peer = rank_ ^ dist;
      const int ours = rank_ & ~(dist - 1), theirs = peer & ~(dist - 1);
      pack(std::span(*all).subspan(ours, dist));
      EDT_RETURN_IF_ERROR(transport_->exchange({{peer, outbox_.data(), outbox_.size()}},
                                               {{peer, all->data() + theirs, dist * sizeof(Descriptor)}}));
      EDT_RETURN_IF_ERROR(take_data(*all, std::span(&peer, 1)));
      for (int r = theirs; r < theirs + dist; ++r) combining = combining && same_allreduce((*all)[r], mine);
      if (!combining) continue;
      // Into the lower block's buffer: reduce() may swap its operands when
      // the output is the second one, which for min and max over a NaN is
      // another result.
      std::vector<uint8_t>& in = inbox_[peer];
      std::vector<uint8_t>& lower = rank_ < peer ? combined_ : in;
      const std::vector<uint8_t>& upper = rank_ < peer ? in : combined_;
      kernels::reduce(lower.data(), lower.data(), upper.data(), mine.count, mine.type, kernels::combining_op(mine.op));
      if (&lower != &combined_) combined_.swap(in);
    }
    return Status::ok();
  }

  // Agreement across hosts with shared memory inside: each rank sends its
  // descriptor (and data) to its host's leader over shared memory, the
  // leaders swap their hosts' descriptors and data combined over TCP, and
  // each leader hands every descriptor and the result back to its host.
  // Only leaders cross hosts: H (H - 1) messages per op over TCP. Every
  // leader combines the same host partials in host order, each host's
  // members in rank order, so every rank gets the same bits.
  Status leader_agree(std::vector<Descriptor>* all) {
    const int leader = topology_.local_members[0];
    if (rank_ != leader) {
      pack(std::span(*all).subspan(rank_, 1));
      EDT_RETURN_IF_ERROR(transport_->exchange({{leader, outbox_.data(), outbox_.size()}},
                                               {{leader, all->data(), all->size() * sizeof(Descriptor)}}));
      EDT_RETURN_IF_ERROR(take_data(*all, std::span(&leader, 1)));
      combined_.swap(inbox_[leader]);
      return Status::ok();
    }
    EDT_RETURN_IF_ERROR(gather_host(all));
    combine_from(*all, topology_.local_members);
    EDT_RETURN_IF_ERROR(swap_among_leaders(all));
    combine_from(*all, topology_.leaders);
    pack(*all);
    std::vector<transport::Send> sends;
    for (int m : topology_.local_members)
      if (m != rank_) sends.push_back({m, outbox_.data(), outbox_.size()});
    return transport_->exchange(sends, std::span<transport::Recv>());
  }

  // The leader takes its host's descriptors, then the data behind them.
  Status gather_host(std::vector<Descriptor>* all) {
    std::vector<transport::Recv> recvs;
    for (int m : topology_.local_members)
      if (m != rank_) recvs.push_back({m, &(*all)[m], sizeof(Descriptor)});
    EDT_RETURN_IF_ERROR(transport_->exchange(std::span<const transport::Send>(), recvs));
    return take_data(*all, topology_.local_members);
  }

  // Each leader sends every other its host's descriptors (in rank order)
  // and its host's data combined (as long as its own data), and takes
  // theirs.
  Status swap_among_leaders(std::vector<Descriptor>* all) {
    std::vector<std::vector<Descriptor>> tables(topology_.hosts());
    for (int h = 0; h < topology_.hosts(); ++h) tables[h].resize(host_members_[h].size());
    for (size_t i = 0; i < tables[topology_.host_index].size(); ++i)
      tables[topology_.host_index][i] = (*all)[host_members_[topology_.host_index][i]];
    pack(tables[topology_.host_index]);
    std::vector<transport::Send> sends;
    std::vector<transport::Recv> recvs;
    for (int h = 0; h < topology_.hosts(); ++h) {
      if (h == topology_.host_index) continue;
      sends.push_back({topology_.leaders[h], outbox_.data(), outbox_.size()});
      recvs.push_back({topology_.leaders[h], tables[h].data(), tables[h].size() * sizeof(Descriptor)});
    }
    EDT_RETURN_IF_ERROR(transport_->exchange(sends, recvs));
    for (int h = 0; h < topology_.hosts(); ++h)
      for (size_t i = 0; i < tables[h].size(); ++i) (*all)[host_members_[h][i]] = tables[h][i];
    return take_data(*all, topology_.leaders);
  }

  // combined_ = the data of `ranks` in their order, this rank's own from
  // combined_ and the others' from the inbox, when all of their descriptors
  // agree with this rank's; else combined_ stays as it was.
  void combine_from(const std::vector<Descriptor>& all, const std::vector<int>& ranks) {
    const Descriptor& mine = all[rank_];
    if (combined_.empty()) return;
    for (int r : ranks)
      if (!same_allreduce(all[r], mine)) return;
    std::vector<const void*> parts;
    for (int r : ranks) parts.push_back(r == rank_ ? combined_.data() : inbox_[r].data());
    scratch_.resize(combined_.size());
    collectives::reduce_in_order(scratch_.data(), parts, mine.count, mine.type, kernels::combining_op(mine.op));
    combined_.swap(scratch_);
  }

  static bool same_allreduce(const Descriptor& a, const Descriptor& b) {
    return a.kind == b.kind && a.count == b.count && a.type == b.type && a.op == b.op && !a.bad_arguments;
  }

  // What follows a rank's descriptor on the wire.
  size_t data_bytes(const Descriptor& d) const { return carries_data(d) ? d.count * dtype_size(d.type) : 0; }

  bool doubling() const { return !single_segment() && (size_ & (size_ - 1)) == 0; }

  Status exchange_descriptors(std::vector<Descriptor>* all) {
    pack(std::span(*all).subspan(rank_, 1));
    std::vector<transport::Send> sends;
    std::vector<transport::Recv> recvs;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      sends.push_back({r, outbox_.data(), outbox_.size()});
      recvs.push_back({r, &(*all)[r], sizeof(Descriptor)});
    }
    return transport_->exchange(sends, recvs);
  }

  // Takes what peers sent behind their descriptors into inbox_[peer], whether
  // or not the descriptors agree: the streams stay in step either way.
  Status take_data(const std::vector<Descriptor>& all, std::span<const int> from) {
    std::vector<transport::Recv> recvs;
    for (int r : from) {
      if (r == rank_) continue;
      inbox_[r].resize(data_bytes(all[r]));
      if (inbox_[r].empty()) continue;
      recvs.push_back({r, inbox_[r].data(), inbox_[r].size()});
    }
    if (recvs.empty()) return Status::ok();
    return transport_->exchange(std::span<const transport::Send>(), recvs);
  }

  // Whether a rank publishing `d` sends its data right behind it: a small
  // allreduce across hosts (or over TCP), whose time is the number of times
  // its ranks wait for each other, so the data rides with the descriptor
  // instead of following it in a round of its own. It depends on `d` and
  // the group alone, so every rank, whatever it called, knows which peers'
  // data to take off the stream. The bound keeps what a rank sends well
  // within every channel's buffer, so sending it all before anything is
  // read cannot block.
  bool carries_data(const Descriptor& d) const {
    if (size_ == 1 || single_segment() || d.kind != OpKind::kAllreduce || d.bad_arguments) return false;
    return d.count > 0 && d.count <= kDataWithDescriptorBytes &&
           d.count * dtype_size(d.type) * size_t(size_ - 1) <= kDataWithDescriptorBytes;
  }

  bool single_segment() const { return shm_ && topology_.local_size() == size_; }

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
    if (carries_data(d)) {
      EDT_RETURN_IF_ERROR(agree(d, nullptr, send));
      std::memcpy(recv, combined_.data(), combined_.size());
    } else {
      EDT_RETURN_IF_ERROR(agree(d, nullptr));
      EDT_RETURN_IF_ERROR(allreduce_data(send, recv, count, type, kernels::combining_op(op)));
    }
    if (op == ReduceOp::kAverage) kernels::finish_average(recv, count, type, size_);
    return Status::ok();
  }

  Status allreduce_data(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
    if (count == 0) return Status::ok();
    const size_t bytes = count * dtype_size(type);
    if (!hierarchical_ && !shm_) return collectives::allreduce(world(), send, recv, count, type, op);
    // Inside the host over shared memory, then across hosts among one leader
    // per host, then from each leader to the rest of its host: pipelined
    // piece by piece for large buffers (collectives/hierarchical.h).
    if (hierarchical_ && bytes >= 2 * collectives::kPieceBytes)
      return collectives::pipelined_hierarchical_allreduce({shm_.get(), local_group(), leader_group()}, send, recv,
                                                           count, type, op);
    const void* host_sum = send;
    if (shm_) {
      EDT_RETURN_IF_ERROR(shm_->allreduce(send, recv, count, type, op));
      host_sum = recv;
    }
    if (!hierarchical_) return Status::ok();
    if (topology_.local_rank == 0) EDT_RETURN_IF_ERROR(collectives::allreduce(leader_group(), host_sum, recv, count, type, op));
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
    if (op == ReduceOp::kAverage) kernels::finish_average(recv, recv_count, type, size_);
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
  Group local_group() const { return Group{transport_.get(), topology_.local_members, topology_.local_rank}; }
  Group leader_group() const { return Group{transport_.get(), topology_.leaders, topology_.host_index}; }

  // Registers this rank in the store and waits for every rank's entry
  // (rendezvous/peer_exchange.h); the entries are PeerInfo, encode()d.
  Result<std::vector<PeerInfo>> gather_peers(Store& store, const PeerInfo& me, Clock::time_point deadline,
                                             std::chrono::milliseconds timeout);

  int rank_ = 0, size_ = 0;
  // What create() was given: create_subgroup forms subgroups with them.
  std::shared_ptr<Store> store_;
  CommunicatorOptions options_;
  transport::Topology topology_;
  std::vector<int> all_members_;
  std::string transport_name_;
  // Several hosts, and shared memory inside at least one of them.
  bool hierarchical_ = false;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<collectives::ShmAllreduce> shm_;
  uint64_t seq_ = 0;  // only the thread running ops touches it
  // Data that came with each rank's descriptor (carries_data); only the
  // thread running ops touches it.
  std::vector<std::vector<uint8_t>> inbox_;
  std::vector<uint8_t> outbox_;    // what this rank sends: descriptors and the data behind them
  std::vector<uint8_t> combined_;  // agree(): this rank's data, then everyone's combined so far
  std::vector<uint8_t> scratch_;
  std::vector<std::vector<int>> host_members_;  // each host's ranks, ascending

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Op, std::shared_ptr<WorkImpl>>> queue_;  // guarded by mu_
  bool busy_ = false;                                             // guarded by mu_
  bool stopping_ = false;                                         // guarded by mu_
  std::thread worker_;
};

Result<std::vector<PeerInfo>> CommunicatorImpl::gather_peers(Store& store, const PeerInfo& me,
                                                            Clock::time_point deadline,
                                                            std::chrono::milliseconds timeout) {
  auto describe = [this](const std::string& blob) {
    auto other = decode(blob, rank_);
    return "host " + (other.is_ok() ? other->host + " pid " + std::to_string(other->process.pid) : std::string("?"));
  };
  EDT_ASSIGN_OR_RETURN(std::vector<std::string> blobs,
                       rendezvous::exchange_blobs(store, {rank_, size_, encode(me), deadline, timeout, describe}));
  std::vector<PeerInfo> peers;
  for (int r = 0; r < size_; ++r) {
    EDT_ASSIGN_OR_RETURN(PeerInfo info, decode(blobs[r], r));
    peers.push_back(std::move(info));
  }
  return peers;
}

// Forms the group: every rank registers its host, listener and process in
// the store and reads everyone's; the topology follows from the hosts, the
// transport from the topology.
Status CommunicatorImpl::init(std::shared_ptr<Store> store, const CommunicatorOptions& options) {
  rank_ = options.rank;
  size_ = options.size;
  store_ = store;
  options_ = options;
  if (size_ < 1) return invalid_argument("communicator size is " + std::to_string(size_) + "; it must be at least 1");
  if (rank_ < 0 || rank_ >= size_)
    return invalid_argument("rank " + std::to_string(rank_) + " is outside 0.." + std::to_string(size_ - 1));
  EDT_ASSIGN_OR_RETURN(transport::TransportKind kind, transport::parse_transport_kind(options.transport));
  if (options.timeout.count() <= 0) return invalid_argument("communicator timeout must be positive");
  const auto deadline = Clock::now() + options.timeout;

  PeerInfo me;
  me.host = options.host.empty() ? this_hostname() : options.host;
  if (me.host.find('\n') != std::string::npos) return invalid_argument("host identity may not contain a newline");
  EDT_ASSIGN_OR_RETURN(transport::tcp::Listener listener, transport::tcp::listen_for_peers());
  struct CloseUnlessHandedOn {
    int fd;
    ~CloseUnlessHandedOn() {
      if (fd >= 0) ::close(fd);
    }
  } listener_guard{listener.fd};
  me.address = net::format_host_port(advertised_address(options, me.host), listener.port);
  me.process = proc::identify(::getpid()).value_or(proc::ProcessId{::getpid(), 0});
  auto peers = gather_peers(*store, me, deadline, options.timeout);
  if (!peers.is_ok()) return peers.status();
  std::mt19937_64 rng(std::random_device{}());
  EDT_ASSIGN_OR_RETURN(std::string nonce_text, store->compare_set("nonce", "", std::to_string(rng() >> 1)));

  std::vector<std::string> hosts;
  for (const PeerInfo& p : *peers) hosts.push_back(p.host);
  topology_ = transport::compute_topology(hosts, rank_);
  for (int r = 0; r < size_; ++r) all_members_.push_back(r);
  inbox_.resize(size_);
  EDT_ASSIGN_OR_RETURN(transport::TransportPlan plan, transport::plan_transport(kind, topology_, *peers));
  hierarchical_ = plan.hierarchical;
  host_members_.resize(topology_.hosts());
  for (int r = 0; r < size_; ++r) host_members_[topology_.host_of[r]].push_back(r);
  transport_name_ = plan.name;

  transport::TransportOptions to{.peers = std::move(peers).value(), .topology = topology_, .plan = plan,
                                 .timeout = options.timeout, .spin = options.spin, .deadline = deadline,
                                 .nonce = std::stoull(nonce_text)};
  listener_guard.fd = -1;  // connect_transport closes it
  EDT_ASSIGN_OR_RETURN(transport::ConnectedTransport connected,
                       transport::connect_transport(*store, listener, std::move(to)));
  transport_ = std::move(connected.transport);
  if (connected.segment)
    shm_ = std::make_unique<collectives::ShmAllreduce>(connected.segment, transport_.get(), topology_.local_members,
                                                       topology_.local_rank);
  return Status::ok();
}

// The members must be ranks of this communicator, ascending, and include
// this rank: then every member computes the same subgroup rank for each.
Status check_members(const std::vector<int>& members, int rank, int size) {
  auto listed = [&] {
    std::string text;
    for (int m : members) text += (text.empty() ? "" : ",") + std::to_string(m);
    return "[" + text + "]";
  };
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= size)
      return invalid_argument("subgroup " + listed() + ": rank " + std::to_string(members[i]) + " is outside 0.." +
                              std::to_string(size - 1));
    if (i > 0 && members[i] <= members[i - 1])
      return invalid_argument("subgroup " + listed() + ": ranks must be ascending and distinct");
  }
  if (std::find(members.begin(), members.end(), rank) == members.end())
    return invalid_argument("subgroup " + listed() + " does not include this rank (" + std::to_string(rank) +
                            "); only its members form it");
  return Status::ok();
}

Result<std::shared_ptr<Communicator>> CommunicatorImpl::create_subgroup(const std::vector<int>& members,
                                                                        const std::string& scope) {
  EDT_RETURN_IF_ERROR(check_members(members, rank_, size_));
  if (scope.empty()) return invalid_argument("a subgroup needs a scope (a name unique in this communicator)");
  CommunicatorOptions options = options_;
  options.rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  options.size = static_cast<int>(members.size());
  options.host = host();
  return Communicator::create(std::make_shared<PrefixStore>("subgroup/" + scope, store_), options);
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
